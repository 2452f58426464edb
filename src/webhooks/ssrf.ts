import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP } from 'node:net';

// The SSRF guard of webhook delivery (docs/configuration.md `WEBHOOK_ALLOW_PRIVATE`): an endpoint may not reach
// loopback, private, link-local, CGNAT, unspecified, multicast or reserved addresses, nor an IPv6
// address that embeds one (IPv4-mapped, NAT64, 6to4). The address is checked where the connection
// is made (guardedLookupWith below, inside the HTTP agent), so a DNS answer that changes between the
// check at `webhooks add` and the connection cannot slip past it.

/** An endpoint whose address is not public; `code` is stable for the attempts table. */
export class WebhookAddressError extends Error {
  override readonly name = 'WebhookAddressError';
  readonly code = 'address_refused';
}

const V4_BLOCKED: [number, number][] = [
  ['0.0.0.0', 8], // "this network", unspecified
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // CGNAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local (cloud metadata)
  ['172.16.0.0', 12],
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.88.99.0', 24], // 6to4 relay anycast
  ['192.168.0.0', 16],
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
].map(([a, bits]) => [v4Number(a as string)!, bits as number]);

function v4Number(address: string): number | undefined {
  const parts = address.split('.');
  if (parts.length !== 4 || parts.some((p) => !/^\d{1,3}$/.test(p) || Number(p) > 255)) return undefined;
  return parts.reduce((n, p) => n * 256 + Number(p), 0);
}

function v4Blocked(n: number): boolean {
  return V4_BLOCKED.some(
    ([base, bits]) => Math.floor(n / 2 ** (32 - bits)) === Math.floor(base / 2 ** (32 - bits)),
  );
}

/** The 8 16-bit groups of an IPv6 address (a trailing dotted quad included); undefined if malformed. */
function v6Groups(address: string): number[] | undefined {
  let text = address.replace(/%.*$/, '');
  const quad = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (quad) {
    const n = v4Number(quad[1]!);
    if (n === undefined) return undefined;
    text = `${text.slice(0, quad.index)}${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const parse = (s: string) =>
    s === '' ? [] : s.split(':').map((g) => (/^[0-9a-f]{1,4}$/i.test(g) ? parseInt(g, 16) : Number.NaN));
  const head = parse(halves[0]!);
  const tail = halves.length === 2 ? parse(halves[1]!) : [];
  const fill = 8 - head.length - tail.length;
  if (halves.length === 1 ? fill !== 0 : fill < 1) return undefined;
  const groups = [...head, ...Array(halves.length === 2 ? fill : 0).fill(0), ...tail];
  return groups.some(Number.isNaN) ? undefined : groups;
}

function v6Blocked(g: number[]): boolean {
  const v4 = (hi: number, lo: number) => v4Blocked(hi * 65_536 + lo);
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zeros(0, 8) || (zeros(0, 7) && g[7] === 1)) return true; // :: and ::1
  if (zeros(0, 5) && g[5] === 0xffff) return v4(g[6]!, g[7]!); // IPv4-mapped
  if (zeros(0, 6)) return true; // IPv4-compatible (deprecated)
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return v4(g[6]!, g[7]!); // NAT64
  if (g[0] === 0x2002) return v4(g[1]!, g[2]!); // 6to4
  if ((g[0]! & 0xfe00) === 0xfc00) return true; // unique local
  if ((g[0]! & 0xffc0) === 0xfe80 || (g[0]! & 0xffc0) === 0xfec0) return true; // link-local, site-local
  if ((g[0]! & 0xff00) === 0xff00) return true; // multicast
  if (g[0] === 0x2001 && g[1] === 0x0db8) return true; // documentation
  if (g[0] === 0x0100 && zeros(1, 4)) return true; // discard
  return false;
}

/** Whether an IP address may be reached by a webhook without `WEBHOOK_ALLOW_PRIVATE`. Malformed = no. */
export function isPublicAddress(address: string): boolean {
  const family = isIP(address.replace(/%.*$/, ''));
  if (family === 4) return !v4Blocked(v4Number(address)!);
  if (family === 6) {
    const groups = v6Groups(address);
    return groups !== undefined && !v6Blocked(groups);
  }
  return false;
}

function refusal(host: string, address: string): WebhookAddressError {
  const shown = host === address ? address : `${host} (${address})`;
  return new WebhookAddressError(
    `webhook address ${shown} is loopback, private, link-local or reserved: refused (set WEBHOOK_ALLOW_PRIVATE=true to allow it, for a receiver beside the worker or a test)`,
  );
}

type LookupCallback = (
  error: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

type LookupOptions = { family?: number | 'IPv4' | 'IPv6'; all?: boolean; hints?: number };
/** How names are resolved: `dns.lookup` with `all: true` (tests stand in a resolver that changes its answer). */
export type Resolve = (
  hostname: string,
  callback: (error: Error | null, addresses: LookupAddress[]) => void,
) => void;

const systemResolve: Resolve = (hostname, callback) =>
  dnsLookup(hostname, { all: true }, (error, addresses) => callback(error, addresses ?? []));

/**
 * A `dns.lookup` for `net.connect`/`tls.connect` that fails when any address of the name is not
 * public: the connection can only go to an address this function saw and allowed.
 */
export function guardedLookupWith(resolve: Resolve = systemResolve) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void =>
    resolve(hostname, (error, found) => {
      if (error) return callback(error as NodeJS.ErrnoException, '');
      const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : options.family;
      const addresses = family ? found.filter((a) => a.family === family) : found;
      const bad = addresses.find((a) => !isPublicAddress(a.address));
      if (bad !== undefined) return callback(refusal(hostname, bad.address) as NodeJS.ErrnoException, '');
      if (options.all) return callback(null, addresses);
      const first = addresses[0];
      if (first === undefined)
        return callback(Object.assign(new Error(`${hostname}: no address`), { code: 'ENOTFOUND' }), '');
      callback(null, first.address, first.family);
    });
}

/** Resolves a URL's host and throws {@link WebhookAddressError} when any address is not public. */
export async function assertPublicUrl(url: URL, resolve?: Resolve): Promise<void> {
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (isIP(host)) {
    if (!isPublicAddress(host)) throw refusal(host, host);
    return;
  }
  await new Promise<void>((done, reject) =>
    guardedLookupWith(resolve)(host, { all: true }, (error) => (error ? reject(error) : done())),
  );
}
