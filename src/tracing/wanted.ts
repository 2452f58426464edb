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
