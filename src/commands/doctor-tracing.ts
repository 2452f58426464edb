import { isOtelVariable, tracingWanted } from '../tracing/wanted.js';

// `cards-sync doctor`'s tracing check: whether the standard OTEL_* variables turn tracing on, where
// the traces go and whether that endpoint takes an export (src/tracing/probe.ts, loaded only
// then). Tracing is not needed to sync, so what is wrong here warns rather than fails. Never
// prints a header's value (vendors put their API key in OTEL_EXPORTER_OTLP_HEADERS) nor anything
// of the endpoint but its host, port and a path of the standard shape.

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
 * Whether tracing is on and, if so, whether the SDK's exporter, built from the process's
 * environment as the worker's is, can send an export of no span to its endpoint.
 */
export async function tracingCheck(env: Env = process.env): Promise<TracingCheck> {
  if (!tracingWanted(env)) return offCheck(env);
  const { probeExporter } = await import('../tracing/probe.js');
  const p = await probeExporter(PROBE_TIMEOUT_MS);
  const sampler = samplerOf(env);
  const service = set(env, 'OTEL_SERVICE_NAME') ?? 'cards-sync';
  const also = p.others.length > 0 ? ` (and ${p.others.join(', ')})` : '';
  if (!p.otlp)
    return {
      verdict: 'ok',
      name: 'tracing',
      says: `on, exporter ${p.others.join(', ')}; sampler ${sampler}`,
    };
  const to = `on: OTLP ${p.protocol} to ${p.endpoint}${also}; sampler ${sampler}; service ${service}`;
  if (p.unsupported !== undefined)
    return {
      verdict: 'WARN',
      name: 'tracing',
      says: `${to}; the protocol ${p.unsupported} is not one the SDK knows (grpc, http/protobuf, http/json): it uses http/protobuf`,
    };
  if (p.refused === undefined) return { verdict: 'ok', name: 'tracing', says: `${to}; it takes an export` };
  const fix =
    p.refused === 'HTTP 401' || p.refused === 'HTTP 403'
      ? ': check OTEL_EXPORTER_OTLP_HEADERS (the vendor key)'
      : p.refused === 'HTTP 404'
        ? ': check the endpoint (a Collector takes OTLP/HTTP on port 4318, at /v1/traces)'
        : '';
  return {
    verdict: 'WARN',
    name: 'tracing',
    says: `${to}; it did not take an export (${p.refused})${fix}: traces are dropped until it does`,
  };
}
