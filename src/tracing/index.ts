import type { Telemetry } from 'bullmq';

// The one door to tracing for the rest of the code. It imports no OpenTelemetry module: while
// tracing is off (no `OTEL_*` variable) every call here is a no-op that costs a function call,
// and only src/tracing/preload.ts, loaded by the entry point when tracing is on, installs the
// OpenTelemetry implementation (src/tracing/otel.ts).

/** Attribute values a span may carry. Never an e-mail, a token, a key or a card number. */
export type SpanAttributes = Record<string, string | number | boolean | undefined>;

/** The trace context of a span, opaque outside src/tracing/otel.ts. */
export interface TraceContext {
  readonly traceContext: true;
}

export interface SpanOptions {
  /** Default `internal`. */
  kind?: 'internal' | 'server' | 'client' | 'producer' | 'consumer';
  attributes?: SpanAttributes;
  /** Parent other than the active context (a batch's transaction under its first answer's span). */
  parent?: TraceContext;
  /** Spans this one serves besides its parent (the other answers of a group commit). */
  links?: readonly TraceContext[];
  /** An incoming request's headers: its `traceparent` continues the caller's trace. */
  headers?: Record<string, string | undefined>;
  /** Starts a trace of its own whatever span is active (a webhook delivery, linked to its sync). Default false. */
  root?: boolean;
  /** Nothing under this span makes a span (the instrumentations' queries): it alone is kept. Default false. */
  quiet?: boolean;
}

/** The span a traced function runs in. */
export interface ActiveSpan {
  set(attributes: SpanAttributes): void;
  /** Its context, to parent or link spans made elsewhere; undefined while tracing is off. */
  context(): TraceContext | undefined;
}

export interface Tracing {
  /** Runs `fn` in a new span (a child of the active one); the span ends, with `fn`'s error if any, when it settles. */
  inSpan<T>(name: string, options: SpanOptions, fn: (span: ActiveSpan) => Promise<T>): Promise<T>;
  /**
   * Runs a job's work outside its span when the sampler left that span out: the instrumentations
   * then skip its queries and requests at once instead of making spans that are dropped.
   */
  unlessSampled<T>(fn: () => Promise<T>): Promise<T>;
  /**
   * Runs `fn` outside any trace: work that serves many jobs (the group commit's next batch) must
   * not carry on in the trace of whichever job happened to set it going.
   */
  detached<T>(fn: () => T): T;
  /** Sets attributes on the active span (the job's, in a worker). */
  annotate(attributes: SpanAttributes): void;
  /** The active span, to annotate or parent later from elsewhere; undefined while tracing is off. */
  current(): ActiveSpan | undefined;
  /** BullMQ's telemetry option: producer and consumer spans linked through the job. */
  queueTelemetry(): Telemetry | undefined;
  /**
   * A span's context as `change_events.tracingspancontext` stores it (migration 0028,
   * docs/events.md): the propagator's fields (W3C `traceparent`, and `tracestate` when there is
   * one) as java.util.Properties text, the form Debezium's tracing integration reads. Undefined
   * while tracing is off and for a span the sampler left out: then nothing is stored.
   */
  contextText(ctx: TraceContext | undefined): string | undefined;
  /** The context {@link contextText} stored, to link a span to; undefined while tracing is off or when unreadable. */
  contextFromText(text: string | null | undefined): TraceContext | undefined;
  /** Exports every span still buffered; called before the process exits. */
  flush(): Promise<void>;
}

const noSpan: ActiveSpan = { set: () => {}, context: () => undefined };

const off: Tracing = {
  inSpan: (_name, _options, fn) => fn(noSpan),
  unlessSampled: (fn) => fn(),
  detached: (fn) => fn(),
  annotate: () => {},
  current: () => undefined,
  queueTelemetry: () => undefined,
  contextText: () => undefined,
  contextFromText: () => undefined,
  flush: async () => {},
};

let current: Tracing = off;

/** The process's tracing: the no-op one unless src/tracing/preload.ts installed OpenTelemetry. */
export function tracing(): Tracing {
  return current;
}

/** Installs an implementation (src/tracing/preload.ts; tests). */
export function installTracing(impl: Tracing | undefined): void {
  current = impl ?? off;
}

// What the commands ask of tracing besides the facade. None of these loads OpenTelemetry: the
// variables are read by wanted.ts, and doctor's probe (probe.ts, which loads the exporters) only
// when loadProbe() is called.
export type { SamplerInEffect } from './probe.js';
export { endpointProblems, isOtelVariable, tracingWanted } from './wanted.js';

/** `doctor`'s probe of the exporter, loaded on demand: it loads OpenTelemetry's exporters. */
export function loadProbe(): Promise<typeof import('./probe.js')> {
  return import('./probe.js');
}
