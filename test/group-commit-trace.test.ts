import { context, propagation, trace } from '@opentelemetry/api';
import { node, tracing as sdk } from '@opentelemetry/sdk-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createGroupCommitter } from '../src/sync/group-commit.js';
import { installTracing, tracing } from '../src/tracing/index.js';
import { otelTracing } from '../src/tracing/otel.js';
import { answerOf, makeCard, testTokens } from './fixtures.js';
import { useTestDatabase } from './helpers.js';

// Issue 38: the group commit serves every job of the worker, so its next batch must not run in
// the trace of whichever job happened to set it going. It did: a batch of unsampled answers,
// started when a traced job's batch finished, ran its queries under that job's span (about 2% of
// the batches at 10% sampling in bench:tracing), so a kept trace showed other subscribers' writes.
// In process, with the real OpenTelemetry SDK and its AsyncLocalStorage context manager.

const database = useTestDatabase();
const exporter = new sdk.InMemorySpanExporter();
const provider = new node.NodeTracerProvider({ spanProcessors: [new sdk.SimpleSpanProcessor(exporter)] });

beforeAll(() => {
  provider.register();
  installTracing(otelTracing('test', async () => {}));
});
afterAll(async () => {
  installTracing(undefined);
  await provider.shutdown();
  trace.disable();
  context.disable();
  propagation.disable();
});

const answer = (subscriberId: number) => answerOf(subscriberId, [makeCard(subscriberId)]);

/** The name of the span active where a batch's transaction ran, or undefined outside any span. */
function activeSpanName(): string | undefined {
  // The SDK's spans have a name; the API's interface does not show it.
  return (trace.getActiveSpan() as { name?: string } | undefined)?.name;
}

it("runs a batch of untraced answers in no trace, though a traced job's batch set it going", async () => {
  const ran: (string | undefined)[] = [];
  const writer = createGroupCommitter(database.handle.db, testTokens, {
    maxInFlight: 1,
    onBatch: () => ran.push(activeSpanName()),
  });
  // A traced job hands its answer over: the first batch starts in the next turn of the loop.
  const traced = tracing().inSpan('job 8101', {}, () => writer.apply(answer(8101)));
  await new Promise((resolve) => setImmediate(resolve));
  // An untraced job's answer waits for the only slot, and goes when the traced batch ends.
  const untraced = writer.apply(answer(8102));
  await Promise.all([traced, untraced]);

  expect(ran).toEqual(['db.group_commit', undefined]);
  const job = exporter.getFinishedSpans().find((s) => s.name === 'job 8101')!;
  const inItsTrace = exporter
    .getFinishedSpans()
    .filter((s) => s.spanContext().traceId === job.spanContext().traceId)
    .map((s) => s.name)
    .sort();
  expect(inItsTrace).toEqual(['db.group_commit', 'job 8101']);
});
