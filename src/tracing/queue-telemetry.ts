import { context, INVALID_SPAN_CONTEXT, trace } from '@opentelemetry/api';
import type { Telemetry } from 'bullmq';
import { BullMQOTelSpan } from 'bullmq-otel';

// BullMQ's kinds, as its `SpanKind` enum numbers them (the same as OpenTelemetry's).
const INTERNAL = 0;

/**
 * BullMQ traces its housekeeping too: every fetch of the next job, every lock renewal, every
 * stalled-job check. Outside a trace each of those would start a trace of its own, several per
 * job, drowning the syncs in the backend and costing the worker a span each. Here an internal
 * operation starts a span only inside a trace (a job's retry or failure under its `process` span);
 * producer and consumer spans, which carry a sync's trace through the job, are kept. A job's
 * completion makes none: it is one Redis call, the `process` span's end shows it, and a span
 * for every kept job is a seventh of what tracing costs (docs/tracing.md, "What it costs").
 */
export function quietQueueTelemetry(inner: Telemetry): Telemetry {
  const silent = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);
  return {
    contextManager: inner.contextManager,
    tracer: {
      startSpan(name, options, ctx) {
        if (
          options?.kind === INTERNAL &&
          (trace.getSpan(ctx ?? context.active()) === undefined || name.startsWith('complete '))
        ) {
          return new BullMQOTelSpan(silent);
        }
        return inner.tracer.startSpan(name, options, ctx);
      },
    },
  };
}
