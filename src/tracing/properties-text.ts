// The text form of a propagated trace context that `change_events.tracingspancontext` and
// `webhook_deliveries.tracingspancontext` hold (migration 0028, docs/events.md): the propagator's
// fields as java.util.Properties text, one `key=value` a line, e.g.
// `traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01`. That is what Debezium's
// tracing integration (ActivateTracingSpan, the outbox event router's `tracing.span.context.field`)
// loads with `Properties.load` before it extracts the context with its propagator.
// No OpenTelemetry here: src/tracing/otel.ts injects and extracts.

// The characters Properties.store escapes with a backslash in keys and values (besides line breaks).
const SPECIAL = /[\\=:#!]/g;

function escaped(text: string): string {
  return text
    .replace(SPECIAL, (c) => `\\${c}`)
    .replace(/\n/g, '\\n')
    .replace(/\r/g, '\\r')
    .replace(/\t/g, '\\t')
    .replace(/^ /, '\\ ');
}

/** The fields as Properties text, in the order given; '' for none. */
export function toPropertiesText(fields: Record<string, string>): string {
  return Object.entries(fields)
    .map(([k, v]) => `${escaped(k)}=${escaped(v)}`)
    .join('\n');
}

const UNESCAPED: Record<string, string> = { n: '\n', r: '\r', t: '\t', f: '\f' };

/**
 * Reads Properties text as Properties.load does for the lines this project and Debezium write:
 * `key=value` or `key:value`, comments (`#`, `!`) and blank lines skipped, backslash escapes.
 * Continuation lines and `\uXXXX` escapes are not read (no propagator field needs them).
 */
export function fromPropertiesText(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of text.split(/\r\n|\r|\n/)) {
    const line = raw.replace(/^[ \t\f]+/, '');
    if (line === '' || line.startsWith('#') || line.startsWith('!')) continue;
    const m = /^((?:\\.|[^\\=: \t\f])*)[ \t\f]*[=:]?[ \t\f]*(.*)$/.exec(line);
    if (!m) continue;
    const unescaped = (s: string) => s.replace(/\\(.)/g, (_, c: string) => UNESCAPED[c] ?? c);
    out[unescaped(m[1]!)] = unescaped(m[2]!);
  }
  return out;
}
