import { convertLegacyHttpOptions } from '@opentelemetry/otlp-exporter-base/node-http';

// How the SDK reads the trace exporter's variables, for what cards-sync says about its exports:
// doctor's tracing line (src/tracing/probe.ts) and the line a short command writes when its spans
// were dropped (src/tracing/preload.ts). Loaded only when tracing is on.

const set = (name: string): string | undefined => process.env[name]?.trim() || undefined;

/** The exporters OTEL_TRACES_EXPORTER names, as @opentelemetry/sdk-node reads it (getSpanProcessorsFromEnv). */
export function exporterNames(): string[] {
  const list = [...new Set((process.env.OTEL_TRACES_EXPORTER ?? '').split(',').map((s) => s.trim()))].filter(
    (s) => s !== '' && s !== 'null',
  );
  return list.length === 0 || (list.length > 1 && list.includes('none')) ? ['otlp'] : list;
}

/** The OTLP protocol the SDK uses, and the one asked for when it does not support it (it then uses http/protobuf). */
export function otlpProtocol(): { protocol: string; unsupported?: string } {
  const asked = set('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ?? set('OTEL_EXPORTER_OTLP_PROTOCOL');
  if (asked === undefined) return { protocol: 'http/protobuf' };
  return ['grpc', 'http/json', 'http/protobuf'].includes(asked)
    ? { protocol: asked }
    : { protocol: 'http/protobuf', unsupported: asked };
}

/** The URL the SDK's OTLP exporter sends to (for OTLP/HTTP, its own configuration code's answer). */
export function otlpUrl(protocol: string): string {
  return protocol === 'grpc'
    ? (set('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') ??
        set('OTEL_EXPORTER_OTLP_ENDPOINT') ??
        'http://localhost:4317')
    : convertLegacyHttpOptions({}, 'TRACES', 'v1/traces', {}).url;
}

/** The error of a failed export, as a code: an HTTP or gRPC status, or a system error's code. Never a message. */
export function codeOf(error: unknown, protocol: string): string {
  const e = error as { code?: unknown; cause?: { code?: unknown }; name?: string } | undefined;
  if (typeof e?.code === 'number') return `${protocol === 'grpc' ? 'gRPC status' : 'HTTP'} ${e.code}`;
  if (typeof e?.code === 'string' && /^[A-Z_0-9]+$/.test(e.code)) return e.code;
  if (typeof e?.cause?.code === 'string') return e.cause.code;
  return e?.name ?? 'Error';
}

/**
 * The one line a short command writes on standard error when the spans it made were not exported
 * within `boundMs`: why (an error's code, or no answer) and where, as host and port only (the
 * URL's path or user may hold a token; headers are never read here).
 */
export function droppedLine(error: unknown, boundMs: number): string {
  const { protocol } = otlpProtocol();
  const message = (error as { message?: unknown } | undefined)?.message;
  // The exporter's own deadline (`Request timed out`), or the span processor's (`Timeout`); an
  // answer the SDK retries (429, 502, 503, 504) comes back without its status once the retries stop.
  const why =
    typeof message === 'string' && /^(request timed out|timeout)$/i.test(message)
      ? 'no answer'
      : message === 'Export failed with retryable status'
        ? 'asked to retry later'
        : codeOf(error, protocol);
  let at = '';
  if (exporterNames().includes('otlp')) {
    try {
      at = ` at ${new URL(otlpUrl(protocol)).host}`;
    } catch {
      // An endpoint that is not a URL: the code says enough.
    }
  }
  const within = boundMs % 1000 === 0 ? `${boundMs / 1000} s` : `${boundMs} ms`;
  return `tracing: spans not exported within ${within} (${why}${at}); dropped`;
}
