import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, createApiClient } from '../../src/api/index.js';
import { applyCardsBatch } from '../../src/sync/apply-cards.js';
import type { CardsToApply } from '../../src/sync/cards-to-apply.js';
import { syncSubscriber } from '../../src/sync/index.js';
import { type ActiveSpan, installTracing, type TraceContext, type Tracing } from '../../src/tracing/index.js';
import { API_KEY, makeCard, ok, testTokens, useScriptedApi } from '../support/fixtures.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';

// which sync's trace context each change event carries (change_events.tracingspancontext),
// in process with a stand-in tracing whose spans are named, so that each event's is known exactly.
// test/process/tracing-delivery.test.ts checks the same with OpenTelemetry in a worker process.

const database = useTestDatabase();
const upstream = useScriptedApi();
let api: ApiClient;
const { logger } = captureLogger();

/** The stored text of a span: its name and number; quotes, a backslash and a line break on purpose. */
const textOf = (ctx: TraceContext | undefined) =>
  ctx === undefined
    ? undefined
    : `traceparent=${(ctx as TraceContext & { id: string }).id}\ntracestate=a\\=b,"q"`;

/** Tracing that names every span `<name>#<n>`; `current()` is a `job#0` span. */
function namedTracing(): { tracing: Tracing; spans: string[] } {
  const spans: string[] = [];
  const span = (id: string): ActiveSpan => ({
    set: () => {},
    context: () => ({ traceContext: true, id }) as TraceContext,
  });
  const tracing: Tracing = {
    inSpan: (name, _options, fn) => {
      const id = `${name}#${spans.length + 1}`;
      spans.push(id);
      return fn(span(id));
    },
    unlessSampled: (fn) => fn(),
    detached: (fn) => fn(),
    annotate: () => {},
    current: () => span('job#0'),
    queueTelemetry: () => undefined,
    contextText: textOf,
    contextFromText: () => undefined,
    flush: async () => {},
  };
  return { tracing, spans };
}

beforeAll(() => {
  api = createApiClient({ baseUrl: upstream.url, apiKey: API_KEY, pathStyle: 'standard', timeoutMs: 2000 });
});
afterAll(async () => {
  await api.close();
});
afterEach(() => installTracing(undefined));

const contextsOf = async (subscriberId: number) =>
  (
    await database.handle.pool.query<{ type: string; tracingspancontext: string | null }>(
      'select type, tracingspancontext from change_events where subscriber_id = $1 order by seq',
      [subscriberId],
    )
  ).rows.map((r) => [r.type, r.tracingspancontext]);

const sync = (subscriberId: number, o: { goneAfterNotFound?: number } = {}) =>
  syncSubscriber(
    { db: database.handle.db, api, logger, tokens: testTokens, changeEvents: true, ...o },
    { target: { subscriberId }, trigger: 'manual' },
  );

const answer = (
  subscriberId: number,
  cards: ReturnType<typeof makeCard>[],
  spanContext?: string,
): CardsToApply => ({
  subscriberId,
  cards,
  run: { email: null, trigger: 'manual', jobId: null, refreshRunId: null, startedAt: new Date() },
  spanContext,
});

describe('the trace context a change event carries', () => {
  it("a sync's events carry its own write span's context, stored exactly", async () => {
    const { tracing, spans } = namedTracing();
    installTracing(tracing);
    upstream.script.set('id:3801', ok([makeCard(3801), makeCard(3801)]));
    await sync(3801);
    const write = spans.find((s) => s.startsWith('db.write_cards#'))!;
    expect(write).toBeDefined();
    const text = textOf({ traceContext: true, id: write } as TraceContext)!;
    expect(await contextsOf(3801)).toEqual([
      ['card.added', text],
      ['card.added', text],
    ]);
  });

  it('in one batch, each subscriber its own; a card that moved carries its taker’s', async () => {
    const card = makeCard(3811);
    await applyCardsBatch(database.handle.db, testTokens, [answer(3811, [card])], { changeEvents: true });
    await applyCardsBatch(
      database.handle.db,
      testTokens,
      [
        answer(3811, [], 'ctx-3811'),
        answer(3812, [{ ...card, subscriberId: 3812 }], 'ctx-3812'),
        answer(3813, [makeCard(3813)], 'ctx-3813'),
      ],
      { changeEvents: true },
    );
    expect(await contextsOf(3811)).toEqual([
      ['card.added', null],
      ['card.removed', 'ctx-3812'],
    ]);
    expect(await contextsOf(3812)).toEqual([['card.changed', 'ctx-3812']]);
    expect(await contextsOf(3813)).toEqual([['card.added', 'ctx-3813']]);
  });

  it("the 404 policy's removals carry the job's span", async () => {
    upstream.script.set('id:3821', ok([makeCard(3821)]));
    await sync(3821);
    const { tracing } = namedTracing();
    installTracing(tracing);
    upstream.script.set('id:3821', { status: 404, body: { title: 'Not Found' } });
    await sync(3821, { goneAfterNotFound: 1 });
    expect(await contextsOf(3821)).toEqual([
      ['card.added', null],
      ['card.removed', textOf({ traceContext: true, id: 'job#0' } as TraceContext)],
    ]);
  });
});
