import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { enqueueSyncs } from '../../jobs/sync/index.js';
import { cardsFor } from '../../src/mock-api/data.js';
import { parseKeyRing } from '../../src/tokens/index.js';
import { fromPropertiesText, toPropertiesText } from '../../src/tracing/properties-text.js';
import { feedHead, insertEndpoint } from '../../src/webhooks/index.js';
import { CARD_TOKEN_KEYS, useScriptedApi, workerEnv } from '../support/fixtures.js';
import { useCleanups, useTestDatabase } from '../support/helpers.js';
import { runCli, startCli, testQueue, waitFor } from '../support/queue-helpers.js';
import { type ReceivedSpan, startOtlpReceiver } from '../support/tracing/otlp-receiver.js';
import { startReceiver } from '../support/webhook-receiver.js';

// a change event's delivery gets a span linked to the sync that wrote the event. A real
// worker process with the standard OTEL_* variables, a local OTLP receiver, and a webhook receiver
// on loopback; and the same worker with tracing off, whose events carry no context at all.

const database = useTestDatabase();
const upstream = useScriptedApi();
const cleanups = useCleanups();
/** A receiver's own token in its URL's query string: no span may hold it. */
const QUERY_TOKEN = 'q-secret-7d1e0c5b9a';
const SPAN_KIND_PRODUCER = 4;

let otlp: Awaited<ReturnType<typeof startOtlpReceiver>>;
let hooks: Awaited<ReturnType<typeof startReceiver>>;
beforeAll(async () => {
  otlp = await startOtlpReceiver();
  hooks = await startReceiver();
});
afterAll(async () => {
  await otlp?.stop();
  await hooks?.close();
});

function setup(extra: Record<string, string> = {}) {
  const q = testQueue();
  cleanups.push(q.cleanup);
  const env = workerEnv(
    { databaseUrl: database.url, redisUrl: inject('redisUrl'), prefix: q.prefix, apiUrl: upstream.url },
    { WEBHOOK_ALLOW_PRIVATE: 'true', CHANGE_EVENTS: 'on', LOG_LEVEL: 'info', ...extra },
  );
  return { ...q, env };
}

const contextsOf = async (subscriberId: number) =>
  (
    await database.handle.pool.query<{ tracingspancontext: string | null }>(
      'select tracingspancontext from change_events where subscriber_id = $1 order by seq',
      [subscriberId],
    )
  ).rows.map((r) => r.tracingspancontext);

describe('the stored trace context', () => {
  it('is Properties text that java.util.Properties reads back, escapes and all', () => {
    const fields = { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' };
    expect(toPropertiesText(fields)).toBe(`traceparent=${fields.traceparent}`);
    const state = { ...fields, tracestate: 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE' };
    expect(toPropertiesText(state)).toBe(
      `traceparent=${fields.traceparent}\ntracestate=rojo\\=00f067aa0ba902b7,congo\\=t61rcWkgMzE`,
    );
    expect(fromPropertiesText(toPropertiesText(state))).toEqual(state);
    // As Properties.store writes it: a comment line with the date first, `:` as the separator.
    expect(fromPropertiesText(`#Thu Nov 26 10:00:00 UTC 2026\ntraceparent:${fields.traceparent}\n`)).toEqual(
      fields,
    );
  });
});

describe('tracing off', () => {
  it('writes no trace context: the events of a sync that adds cards have tracingspancontext null', async () => {
    const q = setup();
    await enqueueSyncs(q.queue, [{ subscriberId: 63_010 }], 'manual');
    const run = await runCli(['worker', '--exit-when-idle'], q.env);
    expect(run.code, run.stderr).toBe(0);
    const contexts = await contextsOf(63_010);
    expect(contexts.length).toBe(cardsFor(63_010).length);
    expect(contexts.every((c) => c === null)).toBe(true);
  });
});

describe('tracing on', () => {
  it('each delivery attempt is a span of its own trace, linked to the write of the sync that made the event', async () => {
    const pool = database.handle.pool;
    const { id: endpointId, secret } = await insertEndpoint(pool, parseKeyRing(CARD_TOKEN_KEYS), {
      url: `${hooks.url}/cards?token=${QUERY_TOKEN}`,
      description: 'tracing test',
      eventTypes: null,
      feedCursor: await feedHead(pool),
    });
    const q = setup({
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '100',
    });
    const worker = startCli(['worker'], q.env);
    cleanups.push(async () => {
      if (worker.process.exitCode === null) worker.process.kill('SIGKILL');
      await worker.done;
    });
    // Two syncs, enqueued together: a group commit may write both in one transaction, yet each
    // subscriber's events carry its own sync's span.
    const subscriberIds = [63_020, 63_021];
    const cards = subscriberIds.flatMap((id) => cardsFor(id));
    await enqueueSyncs(
      q.queue,
      subscriberIds.map((subscriberId) => ({ subscriberId })),
      'manual',
    );
    await waitFor('every event delivered', async () => hooks.received.length >= cards.length, 30_000);
    worker.process.kill('SIGTERM');
    expect((await worker.done).code).toBe(0);

    // Each sync's write span, and its context in every event it wrote.
    const spans = otlp.spans;
    const writes = new Map<number, ReceivedSpan>();
    for (const subscriberId of subscriberIds) {
      const job = await waitFor('the job span', async () =>
        spans.find(
          (s) =>
            s.name.startsWith('process') && s.attributes['cards_sync.subscriber'] === `id:${subscriberId}`,
        ),
      );
      const write = spans.find((s) => s.name === 'db.write_cards' && s.parentSpanId === job.spanId)!;
      expect(write, 'the sync’s write span').toBeDefined();
      writes.set(subscriberId, write);
      const stored = `traceparent=00-${write.traceId}-${write.spanId}-01`;
      expect(await contextsOf(subscriberId)).toEqual(cardsFor(subscriberId).map(() => stored));
    }

    // One `webhook deliver` span per attempt, a trace of its own, linked to its sync's write span.
    const deliveries = await waitFor('the delivery spans', async () => {
      const found = spans.filter((s) => s.name === 'webhook deliver');
      return found.length >= cards.length ? found : undefined;
    });
    const received = new Map(hooks.received.map((r) => [String(r.headers['webhook-id']), r]));
    const byId = new Map<string, ReceivedSpan>(spans.map((s) => [s.spanId, s]));
    for (const d of deliveries) {
      const request = received.get(String(d.attributes['cards_sync.event_id']))!;
      expect(request, 'the delivery the receiver got').toBeDefined();
      const write = writes.get(
        (JSON.parse(request.body) as { data: { subscriberId: number } }).data.subscriberId,
      )!;
      expect(d.kind).toBe(SPAN_KIND_PRODUCER);
      expect(d.parentSpanId).toBe('');
      expect(d.traceId).not.toBe(write.traceId);
      expect(d.links).toEqual([{ traceId: write.traceId, spanId: write.spanId }]);
      expect(d.attributes).toMatchObject({
        'cards_sync.webhook.endpoint_id': endpointId,
        'cards_sync.attempt': 1,
        'http.response.status_code': 200,
        'cards_sync.webhook.outcome': 'delivered',
      });
      expect(typeof d.attributes['cards_sync.webhook.delivery_id']).toBe('number');
      // undici's POST is its child, and the receiver got that span's traceparent.
      const post = spans.find((s) => s.parentSpanId === d.spanId && s.name === 'POST')!;
      expect(post, 'undici span').toBeDefined();
      expect(byId.get(post.parentSpanId)).toBe(d);
      // Not the API: its path may hold the receiver's token, so only its origin is kept.
      expect(post.attributes['url.full']).toBe(`${new URL(hooks.url).origin}/REDACTED`);
      expect(post.attributes['url.path']).toBe('/REDACTED');
      expect(post.attributes['url.query']).toBeUndefined();
      expect(request.headers.traceparent).toBe(`00-${post.traceId}-${post.spanId}-01`);
    }
    expect(new Set(deliveries.map((d) => d.attributes['cards_sync.event_id'])).size).toBe(cards.length);

    // No span holds the signing secret, the receiver's query token, or a body (its card numbers,
    // its event's JSON).
    const values = spans.flatMap((s) => [s.name, ...s.raw.map((a) => JSON.stringify(a.value))]);
    const secrets = [
      secret,
      secret.replace(/^whsec_/, ''),
      QUERY_TOKEN,
      '"binNumber"',
      JSON.stringify('"binNumber"').slice(1, -1),
      ...cards.flatMap((c) => [c.cardToken, c.binNumber]),
    ];
    for (const s of secrets)
      expect(
        values.filter((v) => v.includes(s)),
        s,
      ).toEqual([]);
  });
});
