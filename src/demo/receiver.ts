import { timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { signature } from '../webhooks/index.js';

// The demo's webhook receiver: a node:http server on loopback that checks each delivery's Standard
// Webhooks signature under the endpoint's secret, as a subscriber's receiver would, and counts
// what arrived. A delivery that does not verify is answered 401 and counted apart.

/** How far a delivery's `webhook-timestamp` may be from this clock (the specification's 5 minutes). */
const TOLERANCE_S = 5 * 60;

interface ReceiverCounts {
  /** Distinct events verified (a redelivery carries the same `webhook-id` and counts once). */
  events: number;
  /** Verified events by type, e.g. `{"card.added": 40}`. */
  byType: Record<string, number>;
  /** Requests whose signature, timestamp or body did not verify. */
  rejected: number;
}

export interface DemoReceiver {
  /** Where deliveries go, `http://127.0.0.1:<port>/hook`. */
  url: string;
  counts(): ReceiverCounts;
  close(): Promise<void>;
}

/** Whether a delivery's headers carry a valid `v1` signature of `body` under `secret`, made recently. */
export function verifyDelivery(
  secret: string,
  headers: IncomingHttpHeaders,
  body: string,
  nowSeconds = Math.floor(Date.now() / 1000),
): boolean {
  const id = headers['webhook-id'];
  const timestamp = headers['webhook-timestamp'];
  const signatures = headers['webhook-signature'];
  if (typeof id !== 'string' || typeof timestamp !== 'string' || typeof signatures !== 'string') return false;
  const seconds = Number(timestamp);
  if (!/^\d+$/.test(timestamp) || Math.abs(nowSeconds - seconds) > TOLERANCE_S) return false;
  const expected = Buffer.from(signature(secret, id, seconds, body));
  return signatures.split(' ').some((given) => {
    const candidate = Buffer.from(given);
    return candidate.length === expected.length && timingSafeEqual(candidate, expected);
  });
}

/** Starts the receiver on a free loopback port; `secret()` is read per request (it is known only once the endpoint exists). */
export async function startDemoReceiver(secret: () => string | undefined): Promise<DemoReceiver> {
  const seen = new Set<string>();
  const byType: Record<string, number> = {};
  let rejected = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const key = secret();
      let type: unknown;
      try {
        type = (JSON.parse(body) as { type?: unknown }).type;
      } catch {
        type = undefined;
      }
      if (
        req.url !== '/hook' ||
        key === undefined ||
        !verifyDelivery(key, req.headers, body) ||
        typeof type !== 'string'
      ) {
        rejected++;
        res.writeHead(401).end();
        return;
      }
      const id = req.headers['webhook-id'] as string;
      if (!seen.has(id)) {
        seen.add(id);
        byType[type] = (byType[type] ?? 0) + 1;
      }
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    counts: () => ({ events: seen.size, byType: { ...byType }, rejected }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
