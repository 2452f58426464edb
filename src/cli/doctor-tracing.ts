import {
  endpointProblems,
  isOtelVariable,
  loadProbe,
  type SamplerInEffect,
  tracingWanted,
} from '../tracing/index.js';

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

/** A variable's value in a line of doctor's output: as it is, quoted when it holds spaces or signs. */
const shownValue = (v: string): string => (/^[\w.,+-]+$/.test(v) ? v : JSON.stringify(v));

/** How much of the traces a sampler keeps, in words. */
function keeps(s: SamplerInEffect): string {
  if (s.name.endsWith('always_off') || s.ratio === 0) return 'samples no trace';
  if (s.ratio === undefined || s.ratio === 1) return 'samples every trace';
  return `samples ${Number((s.ratio * 100).toPrecision(6))}% of the traces`;
}

/**
 * The sampler in effect, in words, and what is wrong when it is not the one OTEL_TRACES_SAMPLER
 * and OTEL_TRACES_SAMPLER_ARG ask for: the SDK falls back in silence (parentbased_always_on for a
 * name it does not know, a ratio of 1 for one that is not a number in [0, 1]).
 */
function samplerOf(env: Env, inEffect: SamplerInEffect): { words: string; problem?: string } {
  const words = inEffect.ratio === undefined ? inEffect.name : `${inEffect.name} ${inEffect.ratio}`;
  // As the SDK reads them: the value as it is (not trimmed), blank as unset.
  const raw = (name: string) => (env[name]?.trim() ? env[name] : undefined);
  const asked = raw('OTEL_TRACES_SAMPLER');
  const arg = raw('OTEL_TRACES_SAMPLER_ARG');
  if (asked !== undefined && asked !== inEffect.name)
    return {
      words,
      problem: `OTEL_TRACES_SAMPLER=${shownValue(asked)} is not a sampler the SDK knows: it ${keeps(inEffect)} (${words})`,
    };
  if (arg === undefined) return { words };
  if (inEffect.ratio === undefined)
    return {
      words,
      problem: `OTEL_TRACES_SAMPLER_ARG=${shownValue(arg)} is not used: ${inEffect.name} takes no ratio (parentbased_traceidratio does): it ${keeps(inEffect)}`,
    };
  if (Number(arg) !== inEffect.ratio)
    return {
      words,
      problem: `OTEL_TRACES_SAMPLER_ARG=${shownValue(arg)} is not a ratio in [0, 1]: it ${keeps(inEffect)} (${words})`,
    };
  return { words };
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
  const { probeExporter, samplerInEffect } = await loadProbe();
  const p = await probeExporter(PROBE_TIMEOUT_MS);
  const sampler = samplerOf(env, samplerInEffect());
  // What is wrong besides the export, each said after it: the line stays ok only without any.
  // An endpoint the SDK passes over comes first: the endpoint shown is then the one used instead.
  const problems = [...endpointProblems(env), ...(sampler.problem === undefined ? [] : [sampler.problem])];
  const line = (verdict: 'ok' | 'WARN', says: string): TracingCheck => ({
    verdict: problems.length > 0 ? 'WARN' : verdict,
    name: 'tracing',
    says: [says, ...problems].join('; '),
  });
  const service = set(env, 'OTEL_SERVICE_NAME') ?? 'cards-sync';
  const also = p.others.length > 0 ? ` (and ${p.others.join(', ')})` : '';
  if (!p.otlp) return line('ok', `on, exporter ${p.others.join(', ')}; sampler ${sampler.words}`);
  const to = `on: OTLP ${p.protocol} to ${p.endpoint}${also}; sampler ${sampler.words}; service ${service}`;
  if (p.unsupported !== undefined)
    return line(
      'WARN',
      `${to}; the protocol ${p.unsupported} is not one the SDK knows (grpc, http/protobuf, http/json): it uses http/protobuf`,
    );
  if (p.refused === undefined) return line('ok', `${to}; it takes an export`);
  const fix =
    p.refused === 'HTTP 401' || p.refused === 'HTTP 403'
      ? ': check OTEL_EXPORTER_OTLP_HEADERS (the vendor key)'
      : p.refused === 'HTTP 404'
        ? ': check the endpoint (a Collector takes OTLP/HTTP on port 4318, at /v1/traces)'
        : '';
  return line(
    'WARN',
    `${to}; it did not take an export (${p.refused})${fix}: traces are dropped until it does`,
  );
}
