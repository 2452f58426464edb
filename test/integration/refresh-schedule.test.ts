import { sql } from 'drizzle-orm';
import { afterEach, describe, expect, it } from 'vitest';
import { capDueTimes, capHolds, claimDue, dueInTurn } from '../../db/refresh/index.js';
import { subscribers } from '../../db/schema/index.js';
import { afterClaim, defaultPolicy, MS_PER_DAY, type PolicyParams } from '../../src/freshness/index.js';
import { useTestDatabase } from '../support/helpers.js';

// The continuous refresh's schedule in real Postgres (subscriber_schedule): claims, holds, plans
// caught up, due times moved by a plan. The refresh running on it is continuous-refresh.test.ts.

const database = useTestDatabase();
afterEach(async () => {
  await database.handle.db.execute(
    sql`truncate refresh_runs, sync_runs, subscribers, subscriber_schedule, saved_cards, saved_card_change_log, refresh_policy`,
  );
});

const pool = () => database.handle.pool;

async function seed(ids: number[], lastSuccessAt: Date | null, nextRefreshAt: Date | null = null) {
  await database.handle.db
    .insert(subscribers)
    .values(ids.map((subscriberId) => ({ subscriberId, lastSuccessAt, nextRefreshAt })));
}

const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

/** A claim under the policy's `afterClaim` with these parameters, as the continuous refresh makes it. */
const claim = (limit: number, params: PolicyParams) =>
  claimDue(pool(), limit, (s, now) => afterClaim(s, now, params));

describe('the schedule in Postgres', () => {
  it('two schedulers claiming at once never take a subscriber twice, and a lost claim falls due again when its hold ends', async () => {
    const ids = range(83_000, 40);
    await seed(ids, new Date(Date.now() - 60_000), new Date(Date.now() - 1000));
    // A max age of 8 s: a claim's lease is a second.
    const params = defaultPolicy(8000 / MS_PER_DAY);
    // 50 claims for 40 subscribers: the second claim takes the 15 the first left and none the
    // first holds. A race (fixed by serialising claims) let the second take all 25 of the first's.
    for (let round = 0; round < 5; round++) {
      await pool().query(
        "update subscriber_schedule set due_at = now() - interval '1 second', leased_until = null where subscriber_id = any($1)",
        [ids],
      );
      const [a, b] = await Promise.all([claim(25, params), claim(25, params)]);
      const [first, second] = a[0] === ids[0] ? [a, b] : [b, a];
      expect(new Set([...first!, ...second!])).toEqual(new Set(ids));
      expect(first).toHaveLength(25);
      expect(second).toHaveLength(15);
    }
    // The claimed subscribers' syncs never happen (the process died): held a second, no more,
    // and due again once the hold ends.
    const { rows } = await pool().query<{ held: number; late: number }>(
      `select count(*) filter (where leased_until > now())::int as held,
          count(*) filter (where leased_until > now() + interval '1.5 seconds' or due_at > now())::int as late
        from subscriber_schedule where subscriber_id = any($1)`,
      [ids],
    );
    expect(rows[0]).toEqual({ held: 40, late: 0 });
    expect(await claim(40, params)).toEqual([]);
    await new Promise((r) => setTimeout(r, 1100));
    expect(await claim(40, params)).toHaveLength(40);
  });

  it("a claim's hold is a HOT update, and the sync that follows hands the row its plan and ends the hold", async () => {
    const ids = range(87_000, 3);
    await seed(ids, new Date(Date.now() - 60_000), new Date(Date.now() - 1000));
    // The claim's own WAL records of the table (pg_walinspect): in this database nothing else writes.
    await pool().query('create extension if not exists pg_walinspect');
    const from = (await pool().query<{ lsn: string }>('select pg_current_wal_insert_lsn()::text as lsn'))
      .rows[0]!.lsn;
    expect(await claim(3, defaultPolicy(7))).toEqual(ids);
    const { rows: records } = await pool().query<{ record_type: string; n: number }>(
      `select record_type, count(*)::int as n from pg_get_wal_records_info($1::pg_lsn, pg_current_wal_flush_lsn())
        where resource_manager = 'Heap' and block_ref like '% rel %/' || (select oid from pg_database where datname = current_database())
          || '/' || pg_relation_filenode('subscriber_schedule') || ' %'
        group by 1 order by 1`,
      [from],
    );
    // Three rows held: three HOT updates, no new entry in the due-time index, and no row lock.
    expect(records).toEqual([{ record_type: 'HOT_UPDATE', n: 3 }]);
    // Pages keep room for them once the table has filled (migration 0037).
    const table = await pool().query<{ reloptions: string[] }>(
      "select reloptions from pg_class where oid = 'subscriber_schedule'::regclass",
    );
    expect(table.rows[0]!.reloptions).toContain('fillfactor=50');
    // 87_000 synced (a plan an hour on), 87_001 failed (no plan), 87_002 not yet.
    await pool().query(
      "update subscribers set last_synced_at = now(), next_refresh_at = now() + interval '1 hour' where subscriber_id = 87000",
    );
    await pool().query('update subscribers set last_synced_at = now() where subscriber_id = 87001');
    const { rows } = await pool().query<{ id: number; held: boolean; due_in: number }>(
      `select subscriber_id as id, leased_until is not null as held,
          round(extract(epoch from due_at - now()))::int as due_in
        from subscriber_schedule where subscriber_id = any($1) order by 1`,
      [ids],
    );
    // The plan; the hold's end (an eighth of the 7-day max age at least); still held, due where it was.
    expect(rows[0]).toEqual({ id: 87_000, held: false, due_in: 3600 });
    expect(rows[1]!.held).toBe(false);
    expect(rows[1]!.due_in).toBeGreaterThanOrEqual((7 * 86_400) / 8 - 5);
    expect(rows[2]).toMatchObject({ id: 87_002, held: true });
    expect(rows[2]!.due_in).toBeLessThanOrEqual(0);
  });

  it('a row another transaction is writing is not taken, and an open transaction does not stall the claims', async () => {
    await seed([88_001, 88_002], new Date(Date.now() - 60_000), new Date(Date.now() + 3_600_000));
    // A sync of 88_001 (or a person's UPDATE) plans it sooner than its row says: its trigger has
    // written the row's new due time, and the transaction stays open.
    const sync = await pool().connect();
    try {
      await sync.query('begin');
      await sync.query(
        "update subscribers set last_synced_at = now(), next_refresh_at = now() + interval '10 minutes' where subscriber_id = 88001",
      );
      // Without a chooser the claim takes the first rows whatever their due time (a test's claim).
      // It read 88_001 as it was before that write, waits a moment for it, then holds the rest.
      expect(await claim(2, defaultPolicy(7))).toEqual([88_002]);
      await sync.query('commit');
    } finally {
      sync.release();
    }
    const { rows } = await pool().query<{ id: number; held: boolean; due_in: number }>(
      `select subscriber_id as id, leased_until is not null as held, round(extract(epoch from due_at - now()))::int as due_in
        from subscriber_schedule where subscriber_id in (88001, 88002) order by 1`,
    );
    // The sync's plan, ten minutes from its own now() (the claim waited a moment in between).
    expect(rows[0]).toMatchObject({ id: 88_001, held: false });
    expect(rows[0]!.due_in).toBeGreaterThanOrEqual(598);
    expect(rows[0]!.due_in).toBeLessThanOrEqual(600);
    expect(rows[1]).toMatchObject({ id: 88_002, held: true });
  });

  it('a plan a sync moved later is caught up by the claim that reaches it, not handed out', async () => {
    await seed([84_001, 84_002, 84_003], new Date(Date.now() - 60_000), new Date(Date.now() - 3000));
    // 84_001's last sync planned a day on and, as an unchanged sync does, left its schedule row.
    await pool().query(
      "update subscribers set next_refresh_at = now() + interval '1 day' where subscriber_id = 84001",
    );
    expect(await claim(2, defaultPolicy(7))).toEqual([84_002, 84_003]);
    const { rows } = await pool().query<{ caught_up: boolean }>(
      // The schedule holds whole milliseconds (migration 0034); the plan here was written to the µs.
      `select abs(extract(epoch from q.due_at - s.next_refresh_at)) < 0.001 as caught_up from subscriber_schedule q
        join subscribers s using (subscriber_id) where subscriber_id = 84001`,
    );
    expect(rows).toEqual([{ caught_up: true }]);
  });

  it('a plan that comes sooner moves the due time, whoever writes it: an earlier release, a person', async () => {
    await seed([86_001, 86_002], new Date(Date.now() - 60_000), new Date(Date.now() - 3000));
    // Both claimed a day on; then 86_002's plan comes sooner, written as a worker of the release
    // before 0025 writes it (the wide row alone, no word to subscriber_schedule).
    await pool().query(
      "update subscriber_schedule set due_at = now() + interval '1 day' where subscriber_id in (86001, 86002)",
    );
    await pool().query(
      "update subscribers set next_refresh_at = now() - interval '1 second' where subscriber_id = 86002",
    );
    expect(await claim(1, defaultPolicy(7))).toEqual([86_002]);
    // A later plan leaves the schedule row alone (the claim catches it up): no second write.
    await pool().query(
      "update subscribers set next_refresh_at = now() + interval '2 days' where subscriber_id = 86001",
    );
    const { rows } = await pool().query<{ later: boolean }>(
      `select due_at < now() + interval '1 day 1 minute' as later from subscriber_schedule where subscriber_id = 86001`,
    );
    expect(rows).toEqual([{ later: true }]);
  });

  it('due times beyond a lowered max age are pulled in, in batches, to the last success + the cap', async () => {
    const lastSuccess = new Date(Date.now() - 30_000);
    await seed(range(85_000, 5), lastSuccess, new Date(Date.now() + 6 * MS_PER_DAY));
    await seed([85_100], lastSuccess, new Date(Date.now() + 10_000));
    expect(await capDueTimes(pool(), 60_000, 2)).toBe(5);
    const { rows } = await pool().query<{ subscriber_id: number; due_ms: number; plan_ms: number }>(
      `select subscriber_id, extract(epoch from q.due_at) * 1000 as due_ms,
          extract(epoch from s.next_refresh_at) * 1000 as plan_ms
        from subscriber_schedule q join subscribers s using (subscriber_id) order by subscriber_id`,
    );
    for (const r of rows.slice(0, 5)) {
      expect(Number(r.due_ms)).toBeCloseTo(lastSuccess.getTime() + 60_000, -2);
      expect(Number(r.plan_ms)).toBe(Number(r.due_ms));
    }
    // Within the bound already: left alone.
    expect(Number(rows[5]!.due_ms)).toBeGreaterThan(Date.now());
    expect(Number(rows[5]!.due_ms)).toBeLessThan(Date.now() + 11_000);
    expect(await capDueTimes(pool(), 60_000)).toBe(0);
    // A claim's hold made under the longer max age (its job lost) is shortened the same way.
    await pool().query(
      "update subscriber_schedule set leased_until = now() + interval '5 days' where subscriber_id in (85000, 85001)",
    );
    await pool().query(
      "update subscriber_schedule set leased_until = now() + interval '10 seconds' where subscriber_id = 85002",
    );
    expect(await capHolds(pool(), 60_000)).toBe(2);
    const holds = await pool().query<{ id: number; ends_in: number }>(
      `select subscriber_id as id, round(extract(epoch from leased_until - now()))::int as ends_in
        from subscriber_schedule where leased_until is not null order by 1`,
    );
    expect(holds.rows).toEqual([
      { id: 85_000, ends_in: 60 },
      { id: 85_001, ends_in: 60 },
      { id: 85_002, ends_in: 10 },
    ]);
  });

  it('a plan going round in turn puts back the due times planned sooner than the round, in batches: the claim then takes them by last success', async () => {
    const ago = (s: number) => new Date(Date.now() - s * 1000);
    // Every token was reissued 60 s ago. 87_001 was planned past the round (pulled in by the cap, as
    // before); 87_002 and 87_003, synced before the event, and 87_004, a busy wallet synced after
    // it, were planned sooner than the round; 87_005 is planned on it; 87_006 was never synced;
    // 87_007, planned sooner too, is held by a claim (its sync under way).
    await seed([87_001], ago(200), ago(-100));
    await seed([87_002], ago(150), ago(140));
    await seed([87_003], ago(100), ago(50));
    await seed([87_004], ago(10), ago(-3));
    await seed([87_005], ago(30), ago(-30));
    await seed([87_006], null, null);
    await seed([87_007], ago(120), ago(-2));
    await pool().query(
      "update subscriber_schedule set leased_until = now() + interval '30 seconds' where subscriber_id = 87007",
    );
    expect(await capDueTimes(pool(), 60_000)).toBe(1);
    expect(await dueInTurn(pool(), 60_000, 2)).toBe(3);
    const { rows } = await pool().query<{
      subscriber_id: string;
      due_ms: number | null;
      plan_ms: number | null;
    }>(
      `select subscriber_id, extract(epoch from q.due_at) * 1000 as due_ms,
          extract(epoch from s.next_refresh_at) * 1000 as plan_ms
        from subscriber_schedule q join subscribers s using (subscriber_id) order by subscriber_id`,
    );
    const due = new Map(rows.map((r) => [Number(r.subscriber_id), r]));
    for (const [id, last] of [
      [87_001, 200],
      [87_002, 150],
      [87_003, 100],
      [87_004, 10],
      [87_005, 30],
    ] as const) {
      expect(Number(due.get(id)!.due_ms), String(id)).toBeCloseTo(Date.now() - last * 1000 + 60_000, -3);
    }
    // The cap moves the subscriber's own plan with the due time; putting in turn leaves it as the
    // sync wrote it (sooner: the claim does not catch up to it).
    expect(Number(due.get(87_001)!.plan_ms)).toBe(Number(due.get(87_001)!.due_ms));
    for (const id of [87_002, 87_003, 87_004])
      expect(Number(due.get(id)!.plan_ms), String(id)).toBeLessThan(Number(due.get(id)!.due_ms) - 5000);
    expect(due.get(87_006)!.due_ms).toBeNull();
    expect(Number(due.get(87_007)!.due_ms)).toBeCloseTo(Date.now() + 2000, -3);
    expect(await dueInTurn(pool(), 60_000)).toBe(0);
    // The never-synced first, then the copies by their last success: the busy wallet synced after
    // the event is no longer ahead of those synced before it; the held row is not handed out.
    expect(await claim(7, defaultPolicy(7))).toEqual([87_006, 87_001, 87_002, 87_003, 87_005, 87_004]);
  });

  it('choosing the next due reads the index, not the table', async () => {
    await pool().query(
      `insert into subscribers (subscriber_id, next_refresh_at, last_success_at)
        select g, now() + (g % 1000) * interval '1 minute', now() from generate_series(1, 20000) g`,
    );
    await pool().query('analyze subscribers');
    await pool().query('analyze subscriber_schedule');
    // The claim's query (db/refresh/schedule.ts), on the narrow table's index.
    const { rows } = await pool().query<{ 'QUERY PLAN': string }>(
      `explain select q.subscriber_id, s.next_refresh_at > q.due_at as behind, s.change_rate_per_day
        from subscriber_schedule q join subscribers s on s.subscriber_id = q.subscriber_id
        where q.subscriber_id <> all('{}'::bigint[]) and (q.leased_until is null or q.leased_until <= clock_timestamp())
        order by q.due_at asc nulls first, q.subscriber_id limit 1000`,
    );
    const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
    expect(plan).toMatch(/Index Scan using subscriber_schedule_due_idx/);
    expect(plan).not.toMatch(/Seq Scan/);
    // The max-age cap's search (db/refresh/schedule-cap.ts): the range beyond the bound, on the index.
    const cap = await pool().query<{ 'QUERY PLAN': string }>(
      `explain select q.subscriber_id from subscriber_schedule q join subscribers s using (subscriber_id)
        where q.due_at > now() + interval '1 day' order by q.due_at, q.subscriber_id limit 5000
        for update of q skip locked`,
    );
    const capPlan = cap.rows.map((r) => r['QUERY PLAN']).join('\n');
    expect(capPlan).toMatch(/Index Scan using subscriber_schedule_due_idx/);
    expect(capPlan).not.toMatch(/Seq Scan on subscriber_schedule/);
  });
});
