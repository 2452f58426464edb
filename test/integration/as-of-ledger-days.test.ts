import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { useTestDatabase } from '../support/helpers.js';

// saved_cards_as_of over a ledger of many days (migration 0032, docs/analytics.md): a wallet's plan
// reads the days around `at` only, the whole table reads each card once, and last_seen_at is what
// the function answered before 0032 (kept here as as_of_0010.saved_card_as_of), for runs a day,
// a week, two months and a year before `at`, runs in the default partition, a run whose clock went
// back, removals, restores and a move.

const database = useTestDatabase();
const pool = () => database.handle.pool;
const DAY = 86_400_000;
const NOW = Date.now();
const daysAgo = (d: number) => new Date(NOW - d * DAY);
const dayOf = (at: Date) => at.toISOString().slice(0, 10);

/** saved_card_as_of as migration 0010 wrote it, in a schema of its own. */
function functionBefore0032(): string {
  const text = readFileSync(
    new URL('../../db/migrations/0010_unchanged_answers_digest.sql', import.meta.url),
    'utf8',
  );
  const body =
    /CREATE OR REPLACE FUNCTION saved_card_as_of\(card bigint, at timestamptz\)[\s\S]*?\n\$\$;/.exec(text);
  if (!body) throw new Error('saved_card_as_of not found in migration 0010');
  return body[0].replace('FUNCTION saved_card_as_of', 'FUNCTION as_of_0010.saved_card_as_of');
}

/** The ledger's days a plan reads, by the partitions it names. */
function daysIn(plan: string): string[] {
  const days = [...plan.matchAll(/ on sync_runs_p(\d{4})(\d\d)(\d\d)\b/g)].map(
    (m) => `${m[1]}-${m[2]}-${m[3]}`,
  );
  return [...new Set(days)].sort();
}

beforeAll(async () => {
  // Seventy days of partitions behind the ones migrate made: a ledger ten weeks long.
  await pool().query(
    `select sync_runs_add_partition(d::date) from generate_series($1::date, $2::date, interval '1 day') d`,
    [dayOf(daysAgo(70)), dayOf(daysAgo(1))],
  );
  const runs = (subscriber: number, status: string, days: string, hour = 1) =>
    pool().query(
      `insert into sync_runs (subscriber_id, trigger, started_at, finished_at, status)
       select $1, 'nightly', $2::timestamptz - make_interval(days => k, hours => $5::int),
         $2::timestamptz - make_interval(days => k, hours => $5::int) + interval '30 seconds', $3
       from unnest($4::int[]) k`,
      [subscriber, new Date(NOW), status, days.split(',').map(Number), hour],
    );
  const range = (from: number, to: number, step = 1) =>
    Array.from({ length: Math.floor((to - from) / step) + 1 }, (_, i) => from + i * step).join(',');
  // 1: every day. 2: every ten days, failures between. 3: one success two months back, then only
  // failures until two days ago. 4: a success 400 days back (no partition: the default one holds
  // it) and one yesterday. 5: every third day, and one run whose clock went back 3 hours while it
  // ran (it started after it finished). 6: never a success.
  await runs(1, 'succeeded', range(1, 70));
  await runs(2, 'succeeded', range(5, 65, 10));
  await runs(2, 'failed', range(1, 70), 5);
  await runs(3, 'succeeded', '62,2');
  await runs(3, 'failed', range(3, 61));
  await runs(4, 'succeeded', '400,1');
  await runs(5, 'succeeded', range(3, 69, 3));
  await pool().query(
    `insert into sync_runs (subscriber_id, trigger, started_at, finished_at, status)
     values (5, 'manual', $1::timestamptz + interval '3 hours', $1, 'succeeded')`,
    [daysAgo(20)],
  );
  await runs(6, 'failed', range(1, 70));
  expect(
    (await pool().query(`select count(*)::int as n from sync_runs_default where subscriber_id = 4`)).rows[0]
      .n,
  ).toBe(1);
  await pool().query(
    `insert into subscribers (subscriber_id, last_success_at)
     select subscriber_id, max(finished_at) filter (where status = 'succeeded') from sync_runs group by 1`,
  );

  // A card of each subscriber, listed since 66 days ago; and removals, restores and a move.
  const first = daysAgo(66);
  await pool().query(
    `insert into saved_cards (id, subscriber_id, card_token, bin_number, card_family, card_bank_code,
       card_bank_name, company_id, create_date, first_seen_at, last_seen_at, updated_at, removed_at)
     select g, s, 't' || g, '4506-xxxx-xxxx-2901', 'Axess', 1, 'AKBANK', 1, $1, $1, $1, $1, null
     from (values (1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6), (7, 1), (8, 3), (9, 2), (10, 1)) v(g, s)`,
    [first],
  );
  // 6: listed an hour ago (its subscriber has no success to carry it).
  await pool().query(`update saved_cards set last_seen_at = $1 where id = 6`, [new Date(NOW - 3_600_000)]);
  // 7: removed 30 days ago (its own last_seen_at then brought up to date, as a removal does).
  await pool().query(
    `update saved_cards set removed_at = $1, last_seen_at = (select max(finished_at) from sync_runs
       where subscriber_id = 1 and status = 'succeeded' and finished_at < $1) where id = 7`,
    [daysAgo(30)],
  );
  const change = (
    card: number,
    subscriber: number,
    kind: string,
    at: Date,
    previous: unknown,
    fields?: string[],
  ) =>
    pool().query(
      `insert into saved_card_changes (card_id, subscriber_id, change, changed_fields, previous, changed_at)
       values ($1, $2, $3, $4, $5, $6)`,
      [card, subscriber, kind, fields ?? null, previous === null ? null : JSON.stringify(previous), at],
    );
  await change(7, 1, 'removed', daysAgo(30), null);
  // 8: removed 45 days ago, restored 4 days ago (the restore says when it was removed).
  await change(8, 3, 'removed', daysAgo(45), null);
  await change(8, 3, 'restored', daysAgo(4), { removed_at: daysAgo(45).toISOString() });
  // 9: removed 50 days ago, restored 20 days ago (a restore written before it said so).
  await change(9, 2, 'removed', daysAgo(50), null);
  await change(9, 2, 'restored', daysAgo(20), null);
  // 10: subscriber 4's until 10 days ago, then subscriber 1's (stored for 4, as its 'added' row says).
  await change(10, 1, 'updated', daysAgo(10), { subscriber_id: 4 }, ['subscriber_id']);
  await pool().query(
    `update saved_cards set added_subscriber_id = 4, added_change_id = nextval('saved_card_changes_id_seq') where id = 10`,
  );
  await pool().query('analyze');

  await pool().query('create schema as_of_0010');
  await pool().query(functionBefore0032());
});

describe('saved_cards_as_of over a ledger of many days', () => {
  it("one wallet's plan reads the days from 8 days before `at` to a day after it, however long the ledger", async () => {
    for (const d of [30, 3, 60]) {
      const at = daysAgo(d);
      const { rows } = await pool().query(
        `explain (costs off) select * from saved_cards_as_of('${at.toISOString()}'::timestamptz, 1)`,
      );
      const days = daysIn(rows.map((r) => r['QUERY PLAN']).join('\n'));
      // The UTC days of [at - 8 days, at + 1 day).
      const window = Array.from({ length: 10 }, (_, i) => dayOf(new Date(at.getTime() + (i - 8) * DAY)));
      expect(days.length, `as of ${d} days ago`).toBeGreaterThan(0);
      expect(
        days.filter((day) => !window.includes(day)),
        `as of ${d} days ago`,
      ).toEqual([]);
    }
  });

  it('the whole table reads each card once, not each card once per card', async () => {
    // Enough cards that a join of saved_cards with itself would show.
    await pool().query(
      `insert into saved_cards (id, subscriber_id, card_token, bin_number, card_family, card_bank_code,
         card_bank_name, company_id, create_date, first_seen_at, last_seen_at, updated_at)
       select g, 1 + g % 6, 't' || g, '4506-xxxx-xxxx-2901', 'Axess', 1, 'AKBANK', 1, $1, $1, $1, $1
       from generate_series(1000, 2999) g`,
      [daysAgo(66)],
    );
    await pool().query('analyze saved_cards');
    try {
      const { rows } = await pool().query(
        `explain (analyze, format json) select count(*)::int from saved_cards_as_of($1)`,
        [daysAgo(1)],
      );
      const removed: number[] = [];
      const walk = (node: Record<string, unknown>) => {
        removed.push(Number(node['Rows Removed by Join Filter'] ?? 0));
        for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child);
      };
      walk(rows[0]['QUERY PLAN'][0].Plan);
      expect(removed.reduce((a, b) => a + b, 0)).toBeLessThan(2010);
    } finally {
      await pool().query('delete from saved_cards where id >= 1000');
      await pool().query('analyze saved_cards');
    }
  });

  it('last_seen_at and every other column are what the function answered before 0032, at any time', async () => {
    // Every 30 hours: each time of day, in 65 days.
    const ats = Array.from({ length: 52 }, (_, i) => new Date(NOW - 65 * DAY + i * 30 * 3_600_000 + 1234));
    // `at` from a column: the days are pruned as the query runs.
    const { rows: differ } = await pool().query(
      `select t.at, c.id, to_jsonb(n) as now, to_jsonb(o) as before
       from unnest($1::timestamptz[]) t(at) cross join saved_cards c
       left join lateral saved_card_as_of(c.id, t.at) n on true
       left join lateral as_of_0010.saved_card_as_of(c.id, t.at) o on true
       where to_jsonb(n) is distinct from to_jsonb(o)`,
      [ats],
    );
    expect(differ).toEqual([]);

    // `at` a parameter: the days are pruned while planning. The wallets too.
    const answers: Record<string, unknown>[] = [];
    for (const at of ats.filter((_, i) => i % 4 === 0)) {
      const { rows } = await pool().query(
        `select $1::timestamptz as at, c.id, n.last_seen_at, n.exact, to_jsonb(n) = to_jsonb(o) as same
         from saved_cards c
         left join lateral saved_card_as_of(c.id, $1::timestamptz) n on true
         left join lateral as_of_0010.saved_card_as_of(c.id, $1::timestamptz) o on true`,
        [at],
      );
      answers.push(...rows);
      for (const s of [1, 2, 3, 4, 5, 6]) {
        const wallet = await pool().query(
          `select v.id, v.last_seen_at from saved_cards_as_of($1::timestamptz, $2) v order by v.id`,
          [at, s],
        );
        const expected = await pool().query(
          `select c.id, o.last_seen_at from saved_cards c
           cross join lateral as_of_0010.saved_card_as_of(c.id, $1::timestamptz) o
           where o.subscriber_id = $2 order by c.id`,
          [at, s],
        );
        expect(wallet.rows, `wallet of ${s} at ${at.toISOString()}`).toEqual(expected.rows);
      }
    }
    expect(answers.filter((a) => !a.same)).toEqual([]);

    // The cases it covers: a run more than 8 days before `at` (subscriber 3, cards 8 and 9), the
    // run of the default partition (subscriber 4, as card 10's owner too), the run that started
    // after it finished, and no run at all (subscriber 6).
    const lastSeen = (card: number, at: Date) =>
      pool()
        .query(`select last_seen_at, exact from saved_card_as_of($1, $2)`, [card, at])
        .then((r) => r.rows[0] as { last_seen_at: Date | null; exact: boolean });
    const run62 = new Date(NOW - 62 * DAY - 3_600_000 + 30_000);
    expect((await lastSeen(3, daysAgo(30))).last_seen_at).toEqual(run62);
    expect((await lastSeen(8, daysAgo(10))).last_seen_at).toEqual(run62);
    expect((await lastSeen(9, daysAgo(30))).last_seen_at).toEqual(
      new Date(NOW - 55 * DAY - 3_600_000 + 30_000),
    );
    const run400 = new Date(NOW - 400 * DAY - 3_600_000 + 30_000);
    expect(await lastSeen(4, daysAgo(30))).toEqual({ last_seen_at: run400, exact: true });
    expect((await lastSeen(10, daysAgo(30))).last_seen_at).toEqual(run400);
    expect((await lastSeen(5, new Date(NOW - 20 * DAY + 3_600_000))).last_seen_at).toEqual(daysAgo(20));
    expect(await lastSeen(6, daysAgo(30))).toEqual({ last_seen_at: null, exact: false });
  }, 120_000);
});
