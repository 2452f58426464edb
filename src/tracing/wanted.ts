/**
 * Whether the standard OpenTelemetry variables ask for traces. Read by the entry point before
 * anything else is loaded, so it imports nothing: with no `OTEL_*` variable set, no OpenTelemetry
 * module is ever loaded.
 *
 * On when an OTLP endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT` or
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) or `OTEL_TRACES_EXPORTER` names an exporter; off whatever
 * else is set when `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`, as the specification
 * defines them.
 */
export function tracingWanted(env: Readonly<Record<string, string | undefined>>): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false;
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '')
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter((s) => s !== '');
  if (exporters.includes('none')) return false;
  return (
    exporters.length > 0 ||
    Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim()) ||
    Boolean(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim())
  );
}

/** A variable of the OpenTelemetry specification (read by its SDK, not by cards-sync's config). */
export function isOtelVariable(name: string): boolean {
  return /^OTEL_[A-Z0-9_]+$/.test(name);
}

type Env = Readonly<Record<string, string | undefined>>;

/** A variable's value as the SDK reads it: as it is, blank as unset. */
const raw = (env: Env, name: string): string | undefined => (env[name]?.trim() ? env[name] : undefined);

/** `http://` and the host and port of a value written without a scheme; a path only of the standard shape. */
function withScheme(value: string): string | undefined {
  try {
    const u = new URL(`http://${value.trim()}`);
    if (u.host === '') return undefined;
    const path = /^(\/[\w.-]+)*\/v1\/traces\/?$/.test(u.pathname)
      ? u.pathname
      : u.pathname === '/'
        ? ''
        : '/…';
    return `http://${u.host}${path}`;
  } catch {
    return undefined;
  }
}

const ENDPOINTS = ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'OTEL_EXPORTER_OTLP_ENDPOINT'] as const;

/**
 * What is wrong with the endpoint variables for the SDK's OTLP/HTTP trace exporter, each in a
 * sentence: which variable, why, the fix, and what happens instead. The exporter takes
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT, else localhost:4318, and
 * passes over a value that is not a URL (`127.0.0.1:4830`: no scheme) in silence; `collector:4318`
 * is a URL of scheme `collector:` to it, and no export leaves. Only the host and port of a value
 * are shown (its path or user may hold a token). Nothing under gRPC, whose exporter takes
 * `host:port` as https://, nor when OTEL_TRACES_EXPORTER names no `otlp`.
 */
export function endpointProblems(env: Env): string[] {
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '' && s !== 'null' && s !== 'none');
  if (exporters.length > 0 && !exporters.includes('otlp')) return [];
  if ((env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL)?.trim() === 'grpc')
    return [];
  const unused: string[] = [];
  let used: (typeof ENDPOINTS)[number] | undefined;
  for (const name of ENDPOINTS) {
    const value = raw(env, name);
    if (value === undefined) continue;
    if (URL.canParse(value)) {
      used = name;
      break;
    }
    unused.push(name);
  }
  const instead = used === undefined ? 'its default (localhost:4318)' : used;
  const problems = unused.map((name) => {
    const fix = withScheme(env[name]!);
    const why = fix === undefined ? 'it is not a URL' : `it has no scheme (write ${fix})`;
    return `${name} is not used, ${why}: the SDK sends traces to ${instead} instead`;
  });
  if (used !== undefined) {
    const value = raw(env, used)!.trim();
    const scheme = new URL(value).protocol;
    const fix = withScheme(value);
    if (!/^https?:$/.test(scheme) && /^[\w.-]+:\d+(\/|$)/.test(value) && fix !== undefined)
      problems.push(
        `${used} has no scheme (write ${fix}): the SDK takes ${scheme} for one and sends nothing`,
      );
  }
  return problems;
}
