import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ExportResultCode } from '@opentelemetry/core';
import { OTLPTraceExporter as GrpcTraceExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { OTLPTraceExporter as JsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtoTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { codeOf, exporterNames, otlpProtocol, otlpUrl } from './exporter-env.js';

// What `cards-sync doctor` asks of tracing when it is on: the exporter the SDK builds from the
// standard variables, sent an export of no span. Loaded only then (src/cli/doctor-tracing.ts
// imports it on demand), like the rest of src/tracing. The exporter is the SDK's own, so what
// doctor tries is what the worker does: the endpoint's path, the headers, the certificates.

/** What the SDK makes of the OTLP variables, and what the endpoint said to an empty export. */
export interface ExportProbe {
  /** `http/protobuf`, `http/json` or `grpc`, as the SDK uses it. */
  protocol: string;
  /** The protocol asked for when the SDK does not support it (it falls back to http/protobuf). */
  unsupported?: string;
  /** Host, port and path of the endpoint; only `/…` for a path other than `…/v1/traces` (it may hold a token). */
  endpoint: string;
  /** Other exporters OTEL_TRACES_EXPORTER names besides `otlp` (`console`, `zipkin`). */
  others: string[];
  /** Whether the SDK builds an OTLP exporter at all (OTEL_TRACES_EXPORTER names `otlp`, or nothing). */
  otlp: boolean;
  /** undefined when the export was taken; else the HTTP status or the error's code. Never a message. */
  refused?: string;
}

/** The sampler the SDK builds from OTEL_TRACES_SAMPLER(_ARG): its specification name, and its ratio when it has one. */
export interface SamplerInEffect {
  name: string;
  ratio?: number;
}

/**
 * The function @opentelemetry/sdk-node builds its sampler with. The package exports NodeSDK alone
 * (its exports map has no other path), so the module is loaded from its file, beside the entry the
 * package resolves to: doctor then says what the SDK does rather than what a copy of its code would.
 * The version is pinned exactly (package.json), and test/process/doctor-tracing.test.ts fails if
 * the file moves or its answers change.
 */
const { createSamplerFromEnv } = (await import(
  pathToFileURL(
    join(dirname(createRequire(import.meta.url).resolve('@opentelemetry/sdk-node')), 'create-from-env.mjs'),
  ).href
)) as { createSamplerFromEnv(): { toString(): string } | undefined };

const SAMPLER_NAMES: Record<string, string> = {
  AlwaysOnSampler: 'always_on',
  AlwaysOffSampler: 'always_off',
  TraceIdRatioBased: 'traceidratio',
};

/**
 * The sampler the worker's SDK uses, built by @opentelemetry/sdk-node's own function from the
 * process's environment (it reads process.env itself), so that what doctor says is what the SDK
 * falls back to: an unknown name is no sampler, and the TracerProvider then uses its default
 * (parentbased_always_on); a ratio that is not a number in [0, 1] is 1.
 */
export function samplerInEffect(): SamplerInEffect {
  const sampler = createSamplerFromEnv();
  // The samplers hold their settings privately; their toString() names the class and the ratio.
  const text = sampler?.toString() ?? 'ParentBased{root=AlwaysOnSampler}';
  const m = /^(ParentBased\{root=)?(AlwaysOnSampler|AlwaysOffSampler|TraceIdRatioBased)(?:\{([^}]*)\})?/.exec(
    text,
  );
  if (!m) return { name: text };
  const name = `${m[1] ? 'parentbased_' : ''}${SAMPLER_NAMES[m[2]!]}`;
  return m[3] === undefined ? { name } : { name, ratio: Number(m[3]) };
}

/** An endpoint for a line of doctor's output: no user, password or query, and a path only of the standard shape. */
function shown(url: string): string {
  try {
    const u = new URL(url);
    if (!/^(https?|grpcs?):$/.test(u.protocol)) return 'an endpoint that is not an http:// or https:// URL';
    return `${u.host}${/^(\/[\w.-]+)*\/v1\/traces\/?$/.test(u.pathname) ? u.pathname : u.pathname === '/' ? '' : '/…'}`;
  } catch {
    return 'an endpoint that is not a URL';
  }
}

/**
 * Builds the SDK's trace exporter as the process's environment configures it (the SDK reads
 * process.env itself) and sends it an export of no span.
 */
export async function probeExporter(timeoutMillis: number): Promise<ExportProbe> {
  const names = exporterNames();
  const others = names.filter((n) => n !== 'otlp');
  const { protocol, unsupported } = otlpProtocol();
  const endpoint = shown(otlpUrl(protocol));
  const base = { protocol, ...(unsupported === undefined ? {} : { unsupported }), endpoint, others };
  if (!names.includes('otlp')) return { ...base, otlp: false };
  const exporter =
    protocol === 'grpc'
      ? new GrpcTraceExporter({ timeoutMillis })
      : protocol === 'http/json'
        ? new JsonTraceExporter({ timeoutMillis })
        : new ProtoTraceExporter({ timeoutMillis });
  try {
    const result = await new Promise<{ code: number; error?: Error }>((resolve) =>
      exporter.export([], resolve),
    );
    return result.code === ExportResultCode.SUCCESS
      ? { ...base, otlp: true }
      : { ...base, otlp: true, refused: codeOf(result.error, protocol) };
  } finally {
    await exporter.shutdown().catch(() => {});
  }
}
