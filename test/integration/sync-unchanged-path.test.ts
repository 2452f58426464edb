import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { syncSubscriber } from '../../src/sync/index.js';
import { makeCard, ok, testTokens, useScriptedApi, useScriptedApiClient } from '../support/fixtures.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';

// The unchanged path: an answer identical to what is stored writes no card row, and
// saved_cards_active still says when a sync last listed each card.

const database = useTestDatabase();
const upstream = useScriptedApi();
const scripted = useScriptedApiClient(upstream);
const { logger } = captureLogger();

const sync = (subscriberId: number, goneAfterNotFound = 3) =>
  syncSubscriber(
    { db: database.handle.db, api: scripted.client, logger, tokens: testTokens, goneAfterNotFound },
    { target: { subscriberId }, trigger: 'manual' },
  );
const query = async <T extends pg.QueryResultRow>(text: string, values: unknown[] = []) =>
  (await database.handle.pool.query<T>(text, values)).rows;

/** Each card row's version (xmin changes whenever the row is written), by id. */
const versions = async (subscriberId: number) =>
  query<{ id: number; xmin: string }>(
    'select id, xmin::text from saved_cards where subscriber_id = $1 order by id',
    [subscriberId],
  );
const digestOf = async (subscriberId: number) =>
  (
    await query<{ cards_digest: string | null }>(
      'select cards_digest from subscribers where subscriber_id = $1',
      [subscriberId],
    )
  )[0]?.cards_digest;

describe('an identical answer', () => {
  it('keeps no job id in its run; a run that changed a card, or failed, keeps its own', async () => {
    const run = (subscriberId: number, jobId: string) =>
      syncSubscriber(
        { db: database.handle.db, api: scripted.client, logger, tokens: testTokens, goneAfterNotFound: 3 },
        { target: { subscriberId }, trigger: 'manual', jobId },
      );
    upstream.script.set('id:7101', ok([makeCard(7101)]));
    await run(7101, 'job-first');
    await run(7101, 'job-unchanged');
    upstream.script.set('id:7101', ok([makeCard(7101), makeCard(7101)]));
    await run(7101, 'job-changed');
    upstream.script.set('id:7101', { status: 400, body: 'no' });
    await run(7101, 'job-failed');
    expect(
      await query('select status, inserted, job_id from sync_runs where subscriber_id = 7101 order by id'),
    ).toEqual([
      { status: 'succeeded', inserted: 1, job_id: 'job-first' },
      { status: 'succeeded', inserted: 0, job_id: null },
      { status: 'succeeded', inserted: 2, job_id: 'job-changed' },
      { status: 'failed', inserted: 0, job_id: 'job-failed' },
    ]);
  });

  it('writes only the run and the subscriber; saved_cards_active moves last_seen_at', async () => {
    const cards = [makeCard(7001), makeCard(7001, { cardFamily: 'World' }), makeCard(7001)];
    upstream.script.set('id:7001', ok(cards));
    await sync(7001);
    const before = await versions(7001);
    expect(await digestOf(7001)).toMatch(/^[A-Za-z0-9_-]{22}$/);
    // The same cards in another order are the same answer.
    upstream.script.set('id:7001', ok([...cards].reverse()));
    const second = await sync(7001);
    expect(second).toMatchObject({
      status: 'succeeded',
      counts: { cardsSeen: 3, unchanged: 3, inserted: 0 },
    });
    expect(await versions(7001)).toEqual(before);
    const [run] = await query<{ finished_at: Date; unchanged: number }>(
      'select finished_at, unchanged from sync_runs where id = $1',
      [second.syncRunId],
    );
    expect(run!.unchanged).toBe(3);
    const active = await query<{ id: number; last_seen_at: Date }>(
      'select id, last_seen_at from saved_cards_active where subscriber_id = 7001 order by id',
    );
    expect(active.map((r) => r.last_seen_at.getTime())).toEqual(
      [1, 2, 3].map(() => run!.finished_at.getTime()),
    );
    const asOf = await query<{ last_seen_at: Date }>(
      'select last_seen_at from saved_cards_as_of(now(), 7001)',
    );
    expect(asOf.map((r) => r.last_seen_at.getTime())).toEqual(
      [1, 2, 3].map(() => run!.finished_at.getTime()),
    );
    const subscriber = await query<{ active_cards: number; last_success_at: Date }>(
      'select active_cards, last_success_at from subscribers where subscriber_id = 7001',
    );
    expect(subscriber[0]).toEqual({ active_cards: 3, last_success_at: run!.finished_at });
  });

  it('a digest the release before stored (43 characters) sends the next sync the full way once: nothing rewritten, the short digest stored', async () => {
    const cards = [makeCard(7301), makeCard(7301)];
    upstream.script.set('id:7301', ok(cards));
    await sync(7301);
    const before = await versions(7301);
    // As a worker of the release before (or one still running in a rolling upgrade) leaves it.
    const older = 'UOXX8qcP0jDW5Owl1el9C7mNfRIxLUqgYo6m62ZKwOU';
    await query('update subscribers set cards_digest = $1 where subscriber_id = 7301', [older]);
    const full = await sync(7301);
    expect(full.counts).toMatchObject({ cardsSeen: 2, unchanged: 2, inserted: 0, updated: 0 });
    expect(await versions(7301)).toEqual(before);
    expect(
      await query('select count(*)::int as n from saved_card_changes where sync_run_id = $1', [
        full.syncRunId,
      ]),
    ).toEqual([{ n: 0 }]);
    const short = await digestOf(7301);
    expect(short).toMatch(/^[A-Za-z0-9_-]{22}$/);
    // And from then on the identical answer is known by its digest again.
    const next = await sync(7301);
    expect(next.counts).toMatchObject({ unchanged: 2, inserted: 0 });
    expect(await digestOf(7301)).toBe(short);
    expect(await versions(7301)).toEqual(before);
  });

  it('updates the subscriber row in place: a HOT update, no schedule row written', async () => {
    upstream.script.set('id:7201', ok([makeCard(7201), makeCard(7201)]));
    await sync(7201);
    const counters = async () =>
      (
        await query<{ upd: number; hot: number; schedule: number }>(
          `select (select n_tup_upd from pg_stat_user_tables where relname = 'subscribers')::int as upd,
            (select n_tup_hot_upd from pg_stat_user_tables where relname = 'subscribers')::int as hot,
            (select n_tup_upd from pg_stat_user_tables where relname = 'subscriber_schedule')::int as schedule`,
        )
      )[0]!;
    // Counters reach pg_stat_user_tables up to a second after the writing connection commits.
    await new Promise((resolve) => setTimeout(resolve, 1200));
    const before = await counters();
    const version = async () =>
      (await query<{ xmin: string }>('select xmin::text from subscribers where subscriber_id = 7201'))[0]!
        .xmin;
    const first = await version();
    await sync(7201);
    expect(await version()).not.toBe(first);
    let after = await counters();
    for (let i = 0; i < 50 && after.upd === before.upd; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      after = await counters();
    }
    // Every update of subscribers since (the sync's, and any the earlier tests' connections
    // reported late) was HOT.
    expect(after.upd - before.upd).toBeGreaterThan(0);
    expect(after.hot - before.hot).toBe(after.upd - before.upd);
    expect(after.schedule - before.schedule).toBe(0);
  });

  it('a changed answer takes the full path: one card updated, one removed with its true last_seen_at', async () => {
    const cards = [makeCard(7002), makeCard(7002), makeCard(7002)];
    upstream.script.set('id:7002', ok(cards));
    await sync(7002);
    const unchanged = await sync(7002);
    const [lastSeen] = await query<{ finished_at: Date }>('select finished_at from sync_runs where id = $1', [
      unchanged.syncRunId,
    ]);
    upstream.script.set('id:7002', ok([{ ...cards[0]!, cardBankName: 'GARANTI' }, cards[1]!]));
    const changed = await sync(7002);
    expect(changed.counts).toMatchObject({ updated: 1, unchanged: 1, removed: 1 });
    const [gone] = await query<{ last_seen_at: Date; removed_at: Date }>(
      'select last_seen_at, removed_at from saved_cards where id = $1',
      [cards[2]!.id],
    );
    // Removed: its own column now says the last sync that listed it, the unchanged one.
    expect(gone!.last_seen_at).toEqual(lastSeen!.finished_at);
    const [changedRow] = await query<{ card_bank_name: string }>(
      'select card_bank_name from saved_cards_active where id = $1',
      [cards[0]!.id],
    );
    expect(changedRow!.card_bank_name).toBe('GARANTI');
    // The same answer again is unchanged once more.
    expect((await sync(7002)).counts).toMatchObject({ unchanged: 2, updated: 0, removed: 0 });
  });

  it('a card another subscriber also lists stays, and its holder’s identical answer stays unchanged', async () => {
    const shared = makeCard(7003);
    const own = makeCard(7003);
    upstream.script.set('id:7003', ok([shared, own]));
    await sync(7003);
    const digest = await digestOf(7003);
    upstream.script.set('id:7004', ok([{ ...shared, subscriberId: 7004 }]));
    await sync(7004);
    // A conflict (test/process/sync-card-conflict.test.ts): the holder's cards are what its answer listed.
    expect(await digestOf(7003)).toBe(digest);
    const back = await sync(7003);
    expect(back.counts).toMatchObject({ unchanged: 2, updated: 0 });
    const owners = await query<{ id: number; subscriber_id: number }>(
      'select id, subscriber_id from saved_cards_active where id = any($1) order by id',
      [[shared.id, own.id]],
    );
    expect(owners.map((o) => o.subscriber_id)).toEqual([7003, 7003]);
  });

  it('cards the 404 policy removed are restored by the identical answer', async () => {
    const cards = [makeCard(7005), makeCard(7005)];
    upstream.script.set('id:7005', ok(cards));
    await sync(7005);
    upstream.script.set('id:7005', { status: 404, body: { message: 'no such subscriber' } });
    const notFound = await sync(7005, 1);
    expect(notFound.status).toBe('not_found');
    expect(await digestOf(7005)).toBeNull();
    upstream.script.set('id:7005', ok(cards));
    const restored = await sync(7005, 1);
    expect(restored.counts).toMatchObject({ restored: 2 });
    expect(
      await query('select id from saved_cards_active where subscriber_id = 7005 order by id'),
    ).toHaveLength(2);
  });

  it('a token change is a change, though every other column is the same', async () => {
    const card = makeCard(7006);
    upstream.script.set('id:7006', ok([card]));
    await sync(7006);
    upstream.script.set('id:7006', ok([{ ...card, cardToken: `new${card.cardToken.slice(3)}` }]));
    const changed = await sync(7006);
    expect(changed.counts).toMatchObject({ updated: 1, unchanged: 0 });
  });
});
