import { and, eq, isNull } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { savedCardChanges, savedCards, subscribers, syncRuns } from '../../db/schema/index.js';
import { registerSubscribers } from '../../db/sync/index.js';
import { type SyncRequest, syncSubscriber } from '../../src/sync/sync-subscriber.js';
import { makeCard, ok, testTokens, useScriptedApi, useScriptedApiClient } from '../support/fixtures.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';

// SYNC_GONE_AFTER_NOT_FOUND (docs/architecture.md, 404 row): after that many not_found answers in a row, a
// subscriber's active cards are marked removed in the transaction of the last one.

const database = useTestDatabase();
const upstream = useScriptedApi();
const scripted = useScriptedApiClient(upstream);
const { logger } = captureLogger();

const db = () => database.handle.db;
const NOT_FOUND = { status: 404, body: { title: 'Not Found' } };

function sync(
  target: { subscriberId: number } | { email: string },
  options: { goneAfterNotFound?: number; jobId?: string } = {},
) {
  const request: SyncRequest = {
    target,
    trigger: 'manual',
    ...(options.jobId ? { jobId: options.jobId } : {}),
  };
  const deps = {
    db: db(),
    api: scripted.client,
    logger,
    tokens: testTokens,
    ...(options.goneAfterNotFound !== undefined ? { goneAfterNotFound: options.goneAfterNotFound } : {}),
  };
  return syncSubscriber(deps, request);
}

/** Syncs `id` answering 404 `times` times; returns the results. */
async function notFound(id: number, times: number, options: { goneAfterNotFound?: number } = {}) {
  upstream.script.set(`id:${id}`, NOT_FOUND);
  const results = [];
  for (let i = 0; i < times; i++) results.push(await sync({ subscriberId: id }, options));
  return results;
}

async function subscriber(id: number) {
  const [row] = await db().select().from(subscribers).where(eq(subscribers.subscriberId, id));
  return row!;
}
async function activeCardIds(id: number) {
  const rows = await db()
    .select({ id: savedCards.id })
    .from(savedCards)
    .where(and(eq(savedCards.subscriberId, id), isNull(savedCards.removedAt)))
    .orderBy(savedCards.id);
  return rows.map((r) => r.id);
}
async function changesOf(id: number) {
  return db()
    .select()
    .from(savedCardChanges)
    .where(eq(savedCardChanges.subscriberId, id))
    .orderBy(savedCardChanges.id);
}
async function runsOf(id: number) {
  return db().select().from(syncRuns).where(eq(syncRuns.subscriberId, id)).orderBy(syncRuns.id);
}

/** A subscriber stored with `n` active cards (and one card its answers stopped listing earlier). */
async function storedWithCards(id: number, n: number) {
  const cards = Array.from({ length: n + 1 }, () => makeCard(id));
  upstream.script.set(`id:${id}`, ok(cards));
  expect(await sync({ subscriberId: id })).toMatchObject({ status: 'succeeded' });
  upstream.script.set(`id:${id}`, ok(cards.slice(0, n)));
  expect(await sync({ subscriberId: id })).toMatchObject({ status: 'succeeded', counts: { removed: 1 } });
  return cards.slice(0, n);
}

describe('consecutive not_found answers', () => {
  it('three in a row mark every active card removed in the third run, with history that says why', async () => {
    const cards = await storedWithCards(301, 3);
    const [first, second] = await notFound(301, 2);
    expect(first).toMatchObject({ status: 'not_found', retryable: false, counts: { removed: 0 } });
    expect(second).toMatchObject({ status: 'not_found', counts: { removed: 0 } });
    expect(await activeCardIds(301)).toEqual(cards.map((c) => c.id));
    expect(await subscriber(301)).toMatchObject({ consecutiveNotFound: 2, goneAt: null, activeCards: 3 });

    const [third] = await notFound(301, 1);
    expect(third).toMatchObject({ status: 'not_found', errorCode: 'not_found', counts: { removed: 3 } });
    expect(third!.errorMessage).toContain('3 in a row');
    expect(await activeCardIds(301)).toEqual([]);
    const run = (await runsOf(301)).at(-1)!;
    expect(run).toMatchObject({ id: third!.syncRunId, status: 'not_found', removed: 3, cardsSeen: 0 });
    const removals = (await changesOf(301)).filter((c) => c.reason === 'not_found');
    expect(removals.map((c) => c.cardId)).toEqual(cards.map((c) => c.id));
    for (const c of removals) {
      expect(c).toMatchObject({ change: 'removed', syncRunId: run.id, changedFields: null, previous: null });
      expect(c.changedAt).toEqual(run.finishedAt);
    }
    const removedAt = await db()
      .select({ removedAt: savedCards.removedAt })
      .from(savedCards)
      .where(eq(savedCards.subscriberId, 301));
    // The card the answers had dropped earlier keeps its own removal; the others share the run's time.
    expect(removedAt.filter((r) => r.removedAt?.getTime() === run.finishedAt.getTime())).toHaveLength(3);
    expect(await subscriber(301)).toMatchObject({
      consecutiveNotFound: 3,
      goneAt: run.finishedAt,
      activeCards: 0,
      lastStatus: 'not_found',
      consecutiveFailures: 3,
    });

    // A fourth finds nothing left to remove and keeps the time the subscriber went.
    const [fourth] = await notFound(301, 1);
    expect(fourth).toMatchObject({ counts: { removed: 0 } });
    expect(await subscriber(301)).toMatchObject({ consecutiveNotFound: 4, goneAt: run.finishedAt });
    expect((await changesOf(301)).filter((c) => c.reason === 'not_found')).toHaveLength(3);
  });

  it('a successful answer in between starts the count again', async () => {
    const cards = await storedWithCards(302, 2);
    await notFound(302, 2);
    upstream.script.set('id:302', ok(cards));
    expect(await sync({ subscriberId: 302 })).toMatchObject({ status: 'succeeded' });
    expect(await subscriber(302)).toMatchObject({ consecutiveNotFound: 0, goneAt: null });
    await notFound(302, 2);
    expect(await activeCardIds(302)).toHaveLength(2);
    expect(await subscriber(302)).toMatchObject({ consecutiveNotFound: 2 });
    const [third] = await notFound(302, 1);
    expect(third).toMatchObject({ counts: { removed: 2 } });
  });

  it('other failures neither count nor start the count again', async () => {
    await storedWithCards(303, 2);
    await notFound(303, 2);
    upstream.script.set('id:303', { status: 503 });
    expect(await sync({ subscriberId: 303 })).toMatchObject({ status: 'failed', retryable: true });
    upstream.script.set('id:303', ok([{ id: 'not a card' }]));
    expect(await sync({ subscriberId: 303 })).toMatchObject({ status: 'invalid_response' });
    expect(await subscriber(303)).toMatchObject({ consecutiveNotFound: 2, consecutiveFailures: 4 });
    expect(await activeCardIds(303)).toHaveLength(2);
    const [third] = await notFound(303, 1);
    expect(third).toMatchObject({ counts: { removed: 2 } });
  });

  it('a later successful answer restores what it lists and clears gone_at', async () => {
    const cards = await storedWithCards(304, 3);
    await notFound(304, 3);
    expect(await activeCardIds(304)).toEqual([]);
    const fresh = makeCard(304);
    upstream.script.set('id:304', ok([cards[0], cards[2], fresh]));
    const back = await sync({ subscriberId: 304 });
    expect(back).toMatchObject({ status: 'succeeded', counts: { restored: 2, inserted: 1, removed: 0 } });
    expect(await activeCardIds(304)).toEqual([cards[0]!.id, cards[2]!.id, fresh.id]);
    const restored = (await changesOf(304)).filter((c) => c.syncRunId === back.syncRunId);
    expect(restored.map((c) => [c.cardId, c.change]).sort(([a], [b]) => Number(a) - Number(b))).toEqual([
      [cards[0]!.id, 'restored'],
      [cards[2]!.id, 'restored'],
      [fresh.id, 'added'],
    ]);
    expect(await subscriber(304)).toMatchObject({
      consecutiveNotFound: 0,
      goneAt: null,
      activeCards: 3,
      lastStatus: 'succeeded',
    });
  });

  it('the API answering again with the very answer it gave before restores every card', async () => {
    const cards = await storedWithCards(311, 3);
    await notFound(311, 3);
    expect(await activeCardIds(311)).toEqual([]);
    upstream.script.set('id:311', ok(cards));
    const back = await sync({ subscriberId: 311 });
    expect(back).toMatchObject({ status: 'succeeded', counts: { restored: 3, unchanged: 0 } });
    expect(await activeCardIds(311)).toEqual(cards.map((c) => c.id));
    expect(await subscriber(311)).toMatchObject({ consecutiveNotFound: 0, goneAt: null, activeCards: 3 });
  });

  it('0 disables the policy: the count goes on, no card is removed', async () => {
    await storedWithCards(305, 2);
    const results = await notFound(305, 5, { goneAfterNotFound: 0 });
    expect(results.every((r) => r.status === 'not_found' && r.counts.removed === 0)).toBe(true);
    expect(await activeCardIds(305)).toHaveLength(2);
    expect(await subscriber(305)).toMatchObject({ consecutiveNotFound: 5, goneAt: null, activeCards: 2 });
  });

  it('a threshold of 1 removes at the first not_found', async () => {
    await storedWithCards(306, 2);
    const [first] = await notFound(306, 1, { goneAfterNotFound: 1 });
    expect(first).toMatchObject({ counts: { removed: 2 } });
    expect(await subscriber(306)).toMatchObject({ consecutiveNotFound: 1, activeCards: 0 });
    expect((await subscriber(306)).goneAt).not.toBeNull();
  });

  it('a retry of a job that already counted does not count again', async () => {
    await storedWithCards(307, 1);
    upstream.script.set('id:307', NOT_FOUND);
    for (let i = 0; i < 3; i++) await sync({ subscriberId: 307 }, { jobId: 'job-307-a' });
    expect(await subscriber(307)).toMatchObject({ consecutiveNotFound: 1, consecutiveFailures: 3 });
    await sync({ subscriberId: 307 }, { jobId: 'job-307-b' });
    await sync({ subscriberId: 307 });
    expect(await subscriber(307)).toMatchObject({ consecutiveNotFound: 3, activeCards: 0 });
    expect((await runsOf(307)).filter((r) => r.status === 'not_found')).toHaveLength(5);
  });

  it('a not_found fetched before a success already applied is older news: recorded, not counted', async () => {
    const cards = await storedWithCards(308, 2);
    await notFound(308, 2);
    // The 404 is slow to arrive; a success fetched after it started is applied first.
    upstream.script.set('id:308', { ...NOT_FOUND, delayMs: 400 });
    const late = sync({ subscriberId: 308 });
    await new Promise((r) => setTimeout(r, 100));
    upstream.script.set('id:308', ok(cards));
    expect(await sync({ subscriberId: 308 })).toMatchObject({ status: 'succeeded' });
    expect(await late).toMatchObject({ status: 'not_found', counts: { removed: 0 } });
    const runs = await runsOf(308);
    expect(runs.at(-1)).toMatchObject({ status: 'not_found' });
    expect(await subscriber(308)).toMatchObject({ consecutiveNotFound: 0, activeCards: 2, goneAt: null });
  });

  it('by e-mail, counts for the subscriber stored with that e-mail; an unknown one gets its run only', async () => {
    const card = makeCard(309);
    upstream.script.set('email:gone.person@example.com', ok([card]));
    expect(await sync({ email: 'gone.person@example.com' })).toMatchObject({ subscriberId: 309 });
    upstream.script.set('email:gone.person@example.com', NOT_FOUND);
    for (let i = 0; i < 3; i++) await sync({ email: 'gone.person@example.com' });
    expect(await subscriber(309)).toMatchObject({ consecutiveNotFound: 3, activeCards: 0 });
    expect(await activeCardIds(309)).toEqual([]);

    upstream.script.set('email:nobody@example.com', NOT_FOUND);
    const unknown = await sync({ email: 'nobody@example.com' });
    expect(unknown).toMatchObject({ status: 'not_found', subscriberId: null, counts: { removed: 0 } });
  });

  it('an unknown subscriber id is recorded and not created', async () => {
    const [result] = await notFound(310, 1, { goneAfterNotFound: 1 });
    expect(result).toMatchObject({ status: 'not_found', subscriberId: 310, counts: { removed: 0 } });
    expect(await runsOf(310)).toHaveLength(1);
    expect(await db().select().from(subscribers).where(eq(subscribers.subscriberId, 310))).toEqual([]);
  });

  it('an id an enqueue made known, that the API does not know either, is forgotten again with its run', async () => {
    // As `cards-sync enqueue --id 391 --id 392` leaves them: known, never synced.
    await registerSubscribers(db(), [391, 392], (ms) => ms / 8, 7 * 86_400_000);
    expect((await subscriber(391)).lastSuccessAt).toBeNull();
    const [result] = await notFound(391, 1);
    expect(result).toMatchObject({ status: 'not_found', subscriberId: 391, counts: { removed: 0 } });
    expect(await runsOf(391)).toHaveLength(1);
    expect(await db().select().from(subscribers).where(eq(subscribers.subscriberId, 391))).toEqual([]);
    const schedule = await database.handle.pool.query(
      'select 1 from subscriber_schedule where subscriber_id = 391',
    );
    expect(schedule.rows).toEqual([]);
    // One the API knows is kept, and synced like any other.
    upstream.script.set('id:392', ok([makeCard(392)]));
    expect(await sync({ subscriberId: 392 })).toMatchObject({ status: 'succeeded' });
    expect((await subscriber(392)).activeCards).toBe(1);
  });
});
