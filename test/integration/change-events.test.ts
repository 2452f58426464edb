import { describe, expect, it } from 'vitest';
import { onEventsCommitted } from '../../db/events/index.js';
import { maintainChangeEvents } from '../../jobs/upkeep/events.js';
import { type ChangeEvent, FEED_START, readFeed } from '../../src/events/index.js';
import { applyCardsBatch } from '../../src/sync/apply-cards.js';
import { syncSubscriber } from '../../src/sync/index.js';
import { makeCard, ok, testTokens, useScriptedApi, useScriptedApiClient } from '../support/fixtures.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';

// every change a sync writes is one event, in its transaction (docs/events.md).

const database = useTestDatabase();
const upstream = useScriptedApi();
const scripted = useScriptedApiClient(upstream);
const { logger } = captureLogger();

const pool = () => database.handle.db.$client;
const sync = (subscriberId: number, o: { goneAfterNotFound?: number } = {}) =>
  syncSubscriber(
    { db: database.handle.db, api: scripted.client, logger, tokens: testTokens, changeEvents: true, ...o },
    { target: { subscriberId }, trigger: 'manual' },
  );

/** Every event the feed holds for one subscriber, in feed order. */
async function eventsOf(subscriberId: number): Promise<ChangeEvent[]> {
  const all: ChangeEvent[] = [];
  let after = FEED_START;
  for (;;) {
    const page = await readFeed(pool(), { after, limit: 500 });
    all.push(...page.events);
    if (page.events.length === 0) break;
    after = page.next;
  }
  return all.filter((e) => e.data.subscriberId === subscriberId);
}

describe('change events from real syncs', () => {
  const card = makeCard(3701, { cardBankName: 'AKBANK T.A.S.' });
  const other = makeCard(3701);

  it('card.added: one per new card, with the masked number and never the token', async () => {
    upstream.script.set('id:3701', ok([card, other]));
    const result = await sync(3701);
    const events = await eventsOf(3701);
    expect(events.map((e) => [e.type, e.data.cardId])).toEqual([
      ['card.added', card.id],
      ['card.added', other.id],
    ]);
    expect(events[0]).toEqual({
      id: expect.stringMatching(/^evt_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/),
      type: 'card.added',
      timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      data: {
        subscriberId: 3701,
        cardId: card.id,
        binNumber: '4761-xxxx-xxxx-0043',
        cardBankCode: 100100000,
        cardBankName: 'AKBANK T.A.S.',
        cardFamily: 'Bonus',
        companyId: -1,
        createDate: '2021-02-28T11:01:35Z',
        changes: null,
        reason: null,
        syncRunId: result.syncRunId,
      },
    });
    expect(JSON.stringify(events)).not.toContain(card.cardToken);
  });

  it('an unchanged sync writes no event', async () => {
    const before = (await eventsOf(3701)).length;
    expect((await sync(3701)).counts).toMatchObject({ unchanged: 2, inserted: 0 });
    expect((await eventsOf(3701)).length).toBe(before);
  });

  it('card.changed: each changed field old and new, the token only as "changed"', async () => {
    upstream.script.set(
      'id:3701',
      ok([{ ...card, cardBankName: 'AKBANK', cardToken: 'a-new-token-0000000000000000000' }, other]),
    );
    await sync(3701);
    const changed = (await eventsOf(3701)).filter((e) => e.type === 'card.changed');
    expect(changed).toHaveLength(1);
    expect(changed[0]!.data).toMatchObject({
      cardId: card.id,
      cardBankName: 'AKBANK',
      changes: { cardBankName: { old: 'AKBANK T.A.S.', new: 'AKBANK' }, cardToken: 'changed' },
      reason: null,
    });
    expect(JSON.stringify(changed)).not.toContain('a-new-token');
  });

  it('card.removed when the answer drops a card, card.restored when it lists it again', async () => {
    upstream.script.set(
      'id:3701',
      ok([{ ...card, cardBankName: 'AKBANK', cardToken: 'a-new-token-0000000000000000000' }]),
    );
    await sync(3701);
    upstream.script.set(
      'id:3701',
      ok([{ ...card, cardBankName: 'AKBANK', cardToken: 'a-new-token-0000000000000000000' }, other]),
    );
    await sync(3701);
    const events = await eventsOf(3701);
    expect(events.slice(-2).map((e) => [e.type, e.data.cardId, e.data.reason])).toEqual([
      ['card.removed', other.id, 'not_listed'],
      ['card.restored', other.id, null],
    ]);
  });

  it('card.removed with reason not_found once the 404 policy removes the cards', async () => {
    const gone = makeCard(3702);
    upstream.script.set('id:3702', ok([gone]));
    await sync(3702);
    upstream.script.set('id:3702', { status: 404, body: { title: 'Not Found' } });
    await sync(3702, { goneAfterNotFound: 1 });
    const events = await eventsOf(3702);
    expect(events.map((e) => [e.type, e.data.cardId, e.data.reason])).toEqual([
      ['card.added', gone.id, null],
      ['card.removed', gone.id, 'not_found'],
    ]);
  });

  it('card.conflict when an answer lists a card another subscriber holds', async () => {
    const held = makeCard(3703);
    upstream.script.set('id:3703', ok([held]));
    await sync(3703);
    upstream.script.set('id:3704', ok([{ ...held, subscriberId: 3704 }]));
    await sync(3704);
    const events = await eventsOf(3704);
    expect(events.map((e) => [e.type, e.data.cardId, e.data.reason, e.data.holderSubscriberId])).toEqual([
      ['card.conflict', held.id, 'held_by_another', 3703],
    ]);
  });

  it('a sync whose transaction rolls back leaves no event', async () => {
    // Fails at commit, after the write and the outbox statement have both run.
    await pool().query(`
      create function fail_3705() returns trigger language plpgsql as $$
      begin raise exception 'test: no commit for 3705'; end $$;
      create constraint trigger fail_3705 after insert on saved_cards deferrable initially deferred
        for each row when (new.subscriber_id = 3705) execute function fail_3705();`);
    try {
      upstream.script.set('id:3705', ok([makeCard(3705)]));
      expect(await sync(3705)).toMatchObject({ status: 'failed', errorCode: 'db_error' });
      expect(await eventsOf(3705)).toEqual([]);
      const { rows } = await pool().query(`select 1 from change_events where subscriber_id = 3705`);
      expect(rows).toEqual([]);
    } finally {
      await pool().query('drop trigger fail_3705 on saved_cards; drop function fail_3705()');
    }
  });
});

describe('cards_sync_change_events_total', () => {
  it('counts the events a sync committed, by type, and none of a transaction that rolled back', async () => {
    const counted: Record<string, number> = {};
    const stop = onEventsCommitted((counts) => {
      for (const [type, n] of Object.entries(counts)) counted[type] = (counted[type] ?? 0) + n;
    });
    try {
      const first = makeCard(3721);
      upstream.script.set('id:3721', ok([first, makeCard(3721)]));
      await sync(3721);
      expect(counted).toEqual({ 'card.added': 2 });
      upstream.script.set('id:3721', ok([{ ...first, cardBankName: 'ANOTHER BANK' }]));
      await sync(3721);
      expect(counted).toEqual({ 'card.added': 2, 'card.changed': 1, 'card.removed': 1 });
      upstream.script.set('id:3721', { status: 404, body: { title: 'Not Found' } });
      await sync(3721, { goneAfterNotFound: 1 });
      expect(counted).toEqual({ 'card.added': 2, 'card.changed': 1, 'card.removed': 2 });

      await pool().query(`
        create function fail_3722() returns trigger language plpgsql as $$
        begin raise exception 'test: no commit for 3722'; end $$;
        create constraint trigger fail_3722 after insert on saved_cards deferrable initially deferred
          for each row when (new.subscriber_id = 3722) execute function fail_3722();`);
      try {
        upstream.script.set('id:3722', ok([makeCard(3722)]));
        expect(await sync(3722)).toMatchObject({ status: 'failed' });
      } finally {
        await pool().query('drop trigger fail_3722 on saved_cards; drop function fail_3722()');
      }
      expect(counted).toEqual({ 'card.added': 2, 'card.changed': 1, 'card.removed': 2 });
    } finally {
      stop();
    }
  });
});

describe('change events of a group commit', () => {
  const answer = (subscriberId: number, cards: ReturnType<typeof makeCard>[]) => ({
    subscriberId,
    cards,
    run: { email: null, trigger: 'manual' as const, jobId: null, refreshRunId: null, startedAt: new Date() },
  });

  it('a card one answer drops and another lists in the same batch: removed (moved) from one, changed for the other', async () => {
    const card = makeCard(3711);
    await applyCardsBatch(database.handle.db, testTokens, [answer(3711, [card])], { changeEvents: true });
    const [a, b] = await applyCardsBatch(
      database.handle.db,
      testTokens,
      [answer(3711, []), answer(3712, [{ ...card, subscriberId: 3712 }])],
      { changeEvents: true },
    );
    expect(
      (await eventsOf(3711)).map((e) => [e.type, e.data.cardId, e.data.reason, e.data.syncRunId]),
    ).toEqual([
      ['card.added', card.id, null, expect.any(Number)],
      ['card.removed', card.id, 'moved', b!.syncRunId],
    ]);
    expect((await eventsOf(3712)).map((e) => [e.type, e.data.changes, e.data.syncRunId])).toEqual([
      ['card.changed', { subscriberId: { old: 3711, new: 3712 } }, b!.syncRunId],
    ]);
    expect(a!.status).toBe('succeeded');
  });
});

describe('retention (CHANGE_EVENTS_RETENTION_DAYS)', () => {
  it('drops whole days past the retention, and old strays of the default partition; the feed no longer has them', async () => {
    await pool().query(`select change_events_add_partition(((now() at time zone 'UTC')::date - 40))`);
    const old = `insert into change_events (subscriber_id, created_at, aggregatetype, aggregateid, type, payload)
      values (3790, now() - make_interval(days => $1), 'subscriber', '3790', 'card.added', '{"subscriberId": 3790}')`;
    await pool().query(old, [40]);
    // No partition holds that day: the default one takes it.
    await pool().query(old, [50]);
    const parts = async () =>
      (
        await pool().query<{ name: string }>(
          `select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid
           where i.inhparent = 'change_events'::regclass`,
        )
      ).rows.map((r) => r.name);
    expect((await eventsOf(3790)).length).toBe(2);
    const done = await maintainChangeEvents(pool(), { retentionDays: 30 });
    expect(done.dropped).toHaveLength(1);
    expect(done.dropped[0]).toMatch(/^change_events_p\d{8}$/);
    expect(done.strays).toBe(1);
    expect(await parts()).not.toContain(done.dropped[0]);
    expect(await eventsOf(3790)).toEqual([]);
    // Today's and the week ahead's partitions are there; a second pass has nothing to do.
    expect((await parts()).length).toBeGreaterThanOrEqual(9);
    expect(await maintainChangeEvents(pool(), { retentionDays: 30 })).toEqual({
      created: [],
      dropped: [],
      strays: 0,
    });
  });
});
