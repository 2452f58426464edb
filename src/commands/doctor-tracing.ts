import { isOtelVariable, tracingWanted } from '../tracing/wanted.js';

// `cards-sync doctor`'s tracing check: whether the standard OTEL_* variables turn tracing on, where
// the traces go and whether that endpoint takes an export. Tracing is not needed to sync, so what
// is wrong here warns rather than fails. Never prints a header's value (vendors put their API key
// in OTEL_EXPORTER_OTLP_HEADERS) nor anything of the endpoint but its host, port and path.

export interface TracingCheck {
  verdict: 'ok' | 'WARN';
  name: 'tracing';
  says: string;
}

type Env = Readonly<Record<string, string | undefined>>;

/** How long the endpoint has to answer the empty export, ms. */
const PROBE_TIMEOUT_MS = 5000;

const set = (env: Env, name: string): string | undefined => {
  const v = env[name]?.trim();
  return v ? v : undefined;
};

/** Host, port and path of an endpoint URL: no user, password or query. */
function shown(url: URL): string {
  return `${url.host}${url.pathname === '/' ? '' : url.pathname}`;
}

/** `k=v,k2=v2` (values URL-encoded), as the specification writes OTEL_EXPORTER_OTLP_HEADERS. */
function headersOf(text: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of (text ?? '').split(',')) {
    const at = pair.indexOf('=');
    if (at <= 0) continue;
    try {
      out[decodeURIComponent(pair.slice(0, at).trim())] = decodeURIComponent(pair.slice(at + 1).trim());
    } catch {
      // A malformed pair is the SDK's to refuse; the probe goes without it.
    }
  }
  return out;
}

/** The sampler as the SDK reads it, in words. */
function samplerOf(env: Env): string {
  const sampler = set(env, 'OTEL_TRACES_SAMPLER') ?? 'parentbased_always_on';
  const arg = set(env, 'OTEL_TRACES_SAMPLER_ARG');
  return /traceidratio/.test(sampler) ? `${sampler} ${arg ?? '1.0'}` : sampler;
}

/** What the check says while tracing is off: why, and whether OTEL_* variables set suggest it was meant to be on. */
function offCheck(env: Env): TracingCheck {
  if (set(env, 'OTEL_SDK_DISABLED')?.toLowerCase() === 'true')
    return { verdict: 'ok', name: 'tracing', says: 'off (OTEL_SDK_DISABLED=true)' };
  if (/(^|,)\s*none\s*(,|$)/i.test(env.OTEL_TRACES_EXPORTER ?? ''))
    return { verdict: 'ok', name: 'tracing', says: 'off (OTEL_TRACES_EXPORTER=none)' };
  const others = Object.keys(env)
    .filter((k) => isOtelVariable(k) && set(env, k) !== undefined)
    .sort();
  if (others.length === 0) return { verdict: 'ok', name: 'tracing', says: 'off (no OTEL_* variable set)' };
  return {
    verdict: 'WARN',
    name: 'tracing',
    says:
      `off, though ${others.join(', ')} ${others.length === 1 ? 'is' : 'are'} set: no ` +
      'OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) says where traces go',
  };
}

/**
 * Whether tracing is on, and if so whether its OTLP/HTTP endpoint takes an export: an empty
 * ExportTraceServiceRequest (no span), with the configured headers. gRPC is not probed.
 */
export async function tracingCheck(env: Env): Promise<TracingCheck> {
  if (!tracingWanted(env)) return offCheck(env);
  const exporters = (set(env, 'OTEL_TRACES_EXPORTER') ?? 'otlp').toLowerCase();
  const sampler = samplerOf(env);
  if (!exporters.split(',').some((e) => e.trim() === 'otlp'))
    return { verdict: 'ok', name: 'tracing', says: `on, exporter ${exporters}; sampler ${sampler}` };
  const protocol =
    set(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ??
    set(env, 'OTEL_EXPORTER_OTLP_PROTOCOL') ??
    'http/protobuf';
  const specific = set(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const base = set(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  let url: URL;
  try {
    // The signal's own endpoint is used as it is; the general one gets the signal's path.
    url =
      specific !== undefined
        ? new URL(specific)
        : protocol === 'grpc'
          ? new URL(base!)
          : new URL(`${base!.replace(/\/+$/, '')}/v1/traces`);
    // `collector:4318` parses, as a URL of scheme `collector:`.
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('not http');
  } catch {
    return {
      verdict: 'WARN',
      name: 'tracing',
      says: `on, but the OTLP endpoint is not an http:// or https:// URL: fix ${specific !== undefined ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' : 'OTEL_EXPORTER_OTLP_ENDPOINT'}`,
    };
  }
  const to = `on: OTLP ${protocol} to ${shown(url)}; sampler ${sampler}; service ${set(env, 'OTEL_SERVICE_NAME') ?? 'cards-sync'}`;
  if (protocol === 'grpc') return { verdict: 'ok', name: 'tracing', says: `${to} (gRPC: not probed)` };
  const json = protocol === 'http/json';
  // A user and password in the URL go as Basic credentials, as Node's http module (the exporter's)
  // sends them; fetch refuses a URL that holds them.
  const basic =
    url.username !== ''
      ? `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString('base64')}`
      : undefined;
  const target = new URL(url);
  target.username = '';
  target.password = '';
  try {
    const res = await fetch(target, {
      method: 'POST',
      headers: {
        ...(basic ? { authorization: basic } : {}),
        ...headersOf(env.OTEL_EXPORTER_OTLP_HEADERS),
        ...headersOf(env.OTEL_EXPORTER_OTLP_TRACES_HEADERS),
        'content-type': json ? 'application/json' : 'application/x-protobuf',
      },
      // An export of no span: `{}`, or the empty protobuf message (no bytes).
      body: json ? '{}' : new Uint8Array(0),
      redirect: 'manual',
      signal: AbortSignal.timeout(PROBE_TIMEOUT_MS),
    });
    await res.body?.cancel();
    if (res.ok)
      return { verdict: 'ok', name: 'tracing', says: `${to}; it takes an export (HTTP ${res.status})` };
    const fix =
      res.status === 401 || res.status === 403
        ? ': check OTEL_EXPORTER_OTLP_HEADERS (the vendor key)'
        : res.status === 404
          ? ': check the endpoint (a Collector takes OTLP/HTTP on port 4318, at /v1/traces)'
          : '';
    return {
      verdict: 'WARN',
      name: 'tracing',
      says: `${to}; it refused an export (HTTP ${res.status})${fix}`,
    };
  } catch (error) {
    const why =
      (error as Error).name === 'TimeoutError'
        ? `no answer in ${PROBE_TIMEOUT_MS / 1000} s`
        : 'cannot connect';
    return { verdict: 'WARN', name: 'tracing', says: `${to}; ${why}: traces are dropped until it answers` };
  }
}
