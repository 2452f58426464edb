import {
  type Attributes,
  type Context,
  context,
  createContextKey,
  createTraceState,
  type Link,
  propagation,
  ROOT_CONTEXT,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  trace,
} from '@opentelemetry/api';
import { suppressTracing } from '@opentelemetry/core';
import type { Telemetry } from 'bullmq';
import { BullMQOtel } from 'bullmq-otel';
import type { ActiveSpan, SpanAttributes, SpanOptions, TraceContext, Tracing } from './index.js';
import { fromPropertiesText, toPropertiesText } from './properties-text.js';
import { quietQueueTelemetry } from './queue-telemetry.js';

// The OpenTelemetry implementation of src/tracing/index.ts: loaded only when tracing is on.

const KINDS: Record<NonNullable<SpanOptions['kind']>, SpanKind> = {
  internal: SpanKind.INTERNAL,
  server: SpanKind.SERVER,
  client: SpanKind.CLIENT,
  producer: SpanKind.PRODUCER,
  consumer: SpanKind.CONSUMER,
};

interface Carried extends TraceContext {
  ctx: Context;
}

function attributesOf(attributes: SpanAttributes | undefined): Attributes {
  const out: Attributes = {};
  if (attributes) for (const [k, v] of Object.entries(attributes)) if (v !== undefined) out[k] = v;
  return out;
}

const unsampled: ActiveSpan = { set: () => {}, context: () => undefined };

/**
 * Whether the sampler left out the span of `ctx`: neither recording here nor sampled by a caller
 * (a remote parent's span does not record here, yet its trace is kept when its flags say so).
 */
function leftOut(ctx: Context): boolean {
  const span = trace.getSpan(ctx);
  return (
    span !== undefined && !span.isRecording() && (span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0
  );
}

/** Marks a context detached from an unsampled job's span: nothing under it makes spans. */
const UNSAMPLED = createContextKey('cards-sync: unsampled');

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/**
 * A span context in the stored form (src/tracing/properties-text.ts): the W3C fields only, written
 * here rather than by the process's propagators, which would add `baggage`, whatever a caller put
 * there, to a row that other systems read.
 */
function storedText(c: SpanContext): string {
  const flags = (c.traceFlags & 0xff).toString(16).padStart(2, '0');
  const fields: Record<string, string> = { traceparent: `00-${c.traceId}-${c.spanId}-${flags}` };
  const state = c.traceState?.serialize();
  if (state) fields.tracestate = state;
  return toPropertiesText(fields);
}

/** The remote span context a stored text names; undefined when it names none. */
function storedContext(text: string): SpanContext | undefined {
  const fields = fromPropertiesText(text);
  const m = TRACEPARENT.exec(fields.traceparent ?? '');
  if (!m) return undefined;
  const c: SpanContext = {
    traceId: m[1]!,
    spanId: m[2]!,
    traceFlags: Number.parseInt(m[3]!, 16),
    isRemote: true,
    ...(fields.tracestate ? { traceState: createTraceState(fields.tracestate) } : {}),
  };
  return trace.isSpanContextValid(c) ? c : undefined;
}

/** The tracing facade over the global OpenTelemetry API (the SDK registered by src/tracing/sdk.ts). */
export function otelTracing(version: string, flush: () => Promise<void>): Tracing {
  const tracer = trace.getTracer('cards-sync', version);
  const telemetry = quietQueueTelemetry(new BullMQOtel({ tracerName: 'bullmq', version }));
  return {
    async inSpan(name, options, fn) {
      let parent = options.root
        ? ROOT_CONTEXT
        : ((options.parent as Carried | undefined)?.ctx ?? context.active());
      if (options.headers) parent = propagation.extract(parent, options.headers);
      // Under a span the sampler left out (a job of the 90% at 10%), a child would be left out
      // too: no span, no context switch, so that an unsampled sync costs next to nothing.
      if (parent.getValue(UNSAMPLED) === true || leftOut(parent)) return fn(unsampled);
      const links: Link[] = (options.links ?? []).map((l) => ({
        context: trace.getSpanContext((l as Carried).ctx)!,
      }));
      const span = tracer.startSpan(
        name,
        {
          kind: KINDS[options.kind ?? 'internal'],
          attributes: attributesOf(options.attributes),
          ...(links.length > 0 ? { links: links.filter((l) => l.context !== undefined) } : {}),
        },
        parent,
      );
      const own = options.quiet ? suppressTracing(trace.setSpan(parent, span)) : trace.setSpan(parent, span);
      try {
        return await context.with(own, () =>
          fn({
            set: (attributes) => span.setAttributes(attributesOf(attributes)),
            context: () => ({ traceContext: true, ctx: own }) as Carried,
          }),
        );
      } catch (error) {
        // The error's class and stable code only: a message may quote what a span must not hold.
        span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error)?.name ?? 'Error' });
        throw error;
      } finally {
        span.end();
      }
    },
    unlessSampled(fn) {
      const active = context.active();
      if (!leftOut(active)) return fn();
      return context.with(trace.deleteSpan(active).setValue(UNSAMPLED, true), fn);
    },
    detached: (fn) => context.with(ROOT_CONTEXT, fn),
    annotate(attributes) {
      const span = trace.getActiveSpan();
      if (span?.isRecording()) span.setAttributes(attributesOf(attributes));
    },
    current() {
      const span = trace.getActiveSpan();
      if (!span?.isRecording()) return undefined;
      const ctx = context.active();
      return {
        set: (attributes) => span.setAttributes(attributesOf(attributes)),
        context: () => ({ traceContext: true, ctx }) as Carried,
      };
    },
    queueTelemetry: (): Telemetry => telemetry,
    contextText(ctx) {
      const c = ctx === undefined ? undefined : trace.getSpanContext((ctx as Carried).ctx);
      return c !== undefined && trace.isSpanContextValid(c) ? storedText(c) : undefined;
    },
    contextFromText(text) {
      const c = text ? storedContext(text) : undefined;
      return c === undefined
        ? undefined
        : ({ traceContext: true, ctx: trace.setSpanContext(ROOT_CONTEXT, c) } as Carried);
    },
    flush,
  };
}
