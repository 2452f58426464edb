import { context, propagation, trace } from '@opentelemetry/api';
import { NodeSDK } from '@opentelemetry/sdk-node';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace';
import type pg from 'pg';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { policyCache } from '../../db/refresh/index.js';
import { createDbClock } from '../../db/sync/clock.js';
import { policyParams } from '../../src/freshness/index.js';
import { createGroupCommitter } from '../../src/sync/index.js';
import { installTracing, tracing } from '../../src/tracing/index.js';
import { otelTracing } from '../../src/tracing/otel.js';
import { answerOf, makeCard, testTokens } from '../support/fixtures.js';
import { useTestDatabase } from '../support/helpers.js';

// work that serves every job of a worker (the group commit's next batch, the shared
// clock's next round, the refresh plan's re-read) must not run in the trace of whichever job
// happened to set it going. It did: with AsyncLocalStorage, a `.finally` or a background refresh
// carries on in its starter's context, so its queries became pg spans under that job's span, often
// already ended: 7 of 337 traced batches at 10% sampling in bench:tracing carried another batch's
// queries. In process, with the real OpenTelemetry SDK and its AsyncLocalStorage context manager.

const database = useTestDatabase();
const exporter = new InMemorySpanExporter();
// The SDK as the worker starts it (its context manager, propagator and tracer provider), its spans
// kept here; no metrics, no logs, no resource detection.
const sdk = new NodeSDK({
  spanProcessors: [new SimpleSpanProcessor({ exporter })],
  metricReaders: [],
  logRecordProcessors: [],
  autoDetectResources: false,
});

beforeAll(() => {
  sdk.start();
  installTracing(otelTracing('test', async () => {}));
});
afterAll(async () => {
  installTracing(undefined);
  await sdk.shutdown();
  trace.disable();
  context.disable();
  propagation.disable();
});
beforeEach(() => exporter.reset());

/** The name of the span active here, or undefined outside any span. */
function activeSpanName(): string | undefined {
  // The SDK's spans have a name; the API's interface does not show it.
  return (trace.getActiveSpan() as { name?: string } | undefined)?.name;
}

/** The test database's pool, telling which span was active when each query was sent. */
function observedPool(seen: (string | undefined)[]): pg.Pool {
  const pool = database.handle.pool;
  return {
    query: (...args: Parameters<pg.Pool['query']>) => {
      seen.push(activeSpanName());
      return (pool.query as (...a: unknown[]) => unknown)(...args);
    },
  } as unknown as pg.Pool;
}

/** The names of the exported spans in the trace of the span called `name`. */
function traceOf(name: string): string[] {
  const spans = exporter.getFinishedSpans();
  const root = spans.find((s) => s.name === name)!;
  return spans
    .filter((s) => s.spanContext().traceId === root.spanContext().traceId)
    .map((s) => s.name)
    .sort();
}

it("group commit: a batch of untraced answers runs in no trace, though a traced job's batch set it going", async () => {
  const ran: (string | undefined)[] = [];
  const writer = createGroupCommitter(database.handle.db, testTokens, {
    maxInFlight: 1,
    onBatch: () => {
      ran.push(activeSpanName());
      // What the pg instrumentation does for each query: a span under whatever span is active.
      trace.getTracer('test').startSpan('batch query').end();
    },
  });
  // A traced job hands its answer over: the first batch starts in the next turn of the loop.
  const traced = tracing().inSpan('job 8101', {}, () => writer.apply(answerOf(8101, [makeCard(8101)])));
  await new Promise((resolve) => setImmediate(resolve));
  // An untraced job's answer waits for the only slot, and goes when the traced batch ends.
  const untraced = writer.apply(answerOf(8102, [makeCard(8102)]));
  await Promise.all([traced, untraced]);

  expect(ran).toEqual(['db.group_commit', undefined]);
  expect(traceOf('job 8101')).toEqual(['batch query', 'db.group_commit', 'job 8101']);
});

it('group commit: the queries make spans only when the answer that opened the batch is traced', async () => {
  const writer = createGroupCommitter(database.handle.db, testTokens, {
    onBatch: () => trace.getTracer('test').startSpan('batch query').end(),
  });
  // One batch: an untraced answer opens it, a traced one joins it in the same turn of the loop.
  const untraced = writer.apply(answerOf(8111, [makeCard(8111)]));
  const traced = tracing().inSpan('job 8112', {}, () => writer.apply(answerOf(8112, [makeCard(8112)])));
  await Promise.all([untraced, traced]);
  // The traced job still shows its batch's transaction, without the queries' spans.
  expect(traceOf('job 8112')).toEqual(['db.group_commit', 'job 8112']);
  const batch = exporter.getFinishedSpans().find((s) => s.name === 'db.group_commit')!;
  expect(batch.attributes['cards_sync.batch_size']).toBe(2);

  // A batch that a traced answer opens shows them.
  exporter.reset();
  const first = tracing().inSpan('job 8113', {}, () => writer.apply(answerOf(8113, [makeCard(8113)])));
  const second = writer.apply(answerOf(8114, [makeCard(8114)]));
  await Promise.all([first, second]);
  expect(traceOf('job 8113')).toEqual(['batch query', 'db.group_commit', 'job 8113']);
});

it("shared clock: the round that follows on runs in no trace, not in the first caller's", async () => {
  const seen: (string | undefined)[] = [];
  const clock = createDbClock(observedPool(seen), { detached: (fn) => tracing().detached(fn) });
  // A traced job starts a round; another caller, in no trace, asks while it is on its way.
  const first = tracing().inSpan('job 8201', {}, () => clock.now());
  const second = clock.now();
  const [a, b] = await Promise.all([first, second]);

  expect(seen).toEqual(['job 8201', undefined]);
  expect(b.getTime()).toBeGreaterThanOrEqual(a.getTime());
});

it('refresh plan: a stale plan is re-read in no trace, not in the trace of the batch that found it stale', async () => {
  const seen: (string | undefined)[] = [];
  const cache = policyCache(observedPool(seen), 60_000, {
    params: policyParams,
    detached: (fn) => tracing().detached(fn),
    ttlMs: 1,
  });
  await cache.load();
  await new Promise((resolve) => setTimeout(resolve, 5));
  await tracing().inSpan('db.group_commit', {}, async () => cache.get());
  await cache.load();

  expect(seen.slice(0, 2)).toEqual([undefined, undefined]);
});
