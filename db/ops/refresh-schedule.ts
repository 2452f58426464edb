import type pg from 'pg';
import { afterClaim, type PolicyParams } from '../../src/freshness/index.js';

// The continuous refresh's reads and writes of `subscribers`: the next due, a uniform sample, and
// the sample the plan is made from. Every choice here reads an index or a sample, never the
// whole table (bench/freshness-index.ts measures it at 10M subscribers).

interface DueRow {
  subscriber_id: number;
  last_success_ms: number | null;
  change_rate_per_day: number | null;
  now_ms: number;
}

/**
 * Takes the `limit` subscribers due first (never planned first, then by `next_refresh_at`), moves
 * their due time on as a claim (src/freshness/schedule.ts `afterClaim`), and returns them. Rows a
 * sync holds are skipped, not waited for; two schedulers never take the same subscriber.
 */
/** Arbitrary constant: the advisory lock that serialises claims of the continuous refresh. */
const CLAIM_LOCK_KEY = 7_246_118_503;

export async function claimDue(pool: pg.Pool, limit: number, params: PolicyParams): Promise<number[]> {
  if (limit <= 0) return [];
  const client = await pool.connect();
  try {
    await client.query('begin');
    // One claim at a time across schedulers. Under READ COMMITTED, SKIP LOCKED alone is not
    // enough: a claim whose snapshot predates another's commit would lock the rows that one just
    // claimed (their new version still matches, having no due-time condition) and take them twice.
    // Waiting for the lock gives the next claim a snapshot that sees the moved due times.
    await client.query('select pg_advisory_xact_lock($1)', [CLAIM_LOCK_KEY]);
    const { rows } = await client.query<DueRow>({
      name: 'cards-sync-claim-due',
      text: `select subscriber_id, (extract(epoch from last_success_at) * 1000)::float8 as last_success_ms,
          change_rate_per_day, (extract(epoch from clock_timestamp()) * 1000)::float8 as now_ms
        from subscribers
        order by next_refresh_at asc nulls first, subscriber_id
        limit $1
        for update skip locked`,
      values: [limit],
    });
    if (rows.length > 0) {
      const ids = rows.map((r) => r.subscriber_id);
      const next = rows.map(
        (r) =>
          new Date(
            afterClaim(
              { lastSuccessAt: r.last_success_ms, observations: null, ratePerDay: r.change_rate_per_day },
              r.now_ms,
              params,
            ),
          ),
      );
      await client.query({
        name: 'cards-sync-claim-move',
        text: `update subscribers s set next_refresh_at = ($2::timestamptz[])[array_position($1::bigint[], s.subscriber_id)]
          where s.subscriber_id = any($1::bigint[])`,
        values: [ids, next],
      });
    }
    await client.query('commit');
    return rows.map((r) => r.subscriber_id);
  } catch (error) {
    await client.query('rollback').catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}

/** How many subscribers there are: the planner's estimate on a large table, an exact count on a small one. */
export async function subscriberCount(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ estimate: number }>(
    `select greatest(reltuples, 0)::float8 as estimate from pg_class where oid = 'subscribers'::regclass`,
  );
  const estimate = rows[0]?.estimate ?? 0;
  if (estimate > SAMPLE_ABOVE) return Math.round(estimate);
  const exact = await pool.query<{ n: number }>('select count(*)::int as n from subscribers');
  return exact.rows[0]!.n;
}

/** Above this many subscribers, figures come from a sample of the table's pages. */
export const SAMPLE_ABOVE = 200_000;

/** `from subscribers`, or a page sample of it big enough for about `rows` rows. */
export function sampledFrom(total: number, rows: number): string {
  if (total <= SAMPLE_ABOVE) return 'subscribers';
  const percent = Math.min(100, Math.max(0.0001, (100 * rows * 2) / total));
  return `subscribers tablesample system (${percent.toFixed(6)})`;
}

/** Subscribers drawn uniformly at random (the audit): each is as likely as any other. */
export async function randomSubscribers(pool: pg.Pool, count: number): Promise<number[]> {
  if (count <= 0) return [];
  const total = await subscriberCount(pool);
  const { rows } = await pool.query<{ subscriber_id: number }>(
    `select subscriber_id from ${sampledFrom(total, Math.max(count * 10, 1000))} order by random() limit $1`,
    [count],
  );
  return rows.map((r) => r.subscriber_id);
}

export interface PlanSample {
  total: number;
  rates: (number | null)[];
  observations: (number[] | null)[];
}

/** What the plan is made from: the rates and observations of up to `size` subscribers. */
export async function planSample(pool: pg.Pool, size = 20_000): Promise<PlanSample> {
  const total = await subscriberCount(pool);
  const { rows } = await pool.query<{
    change_rate_per_day: number | null;
    change_observations: number[] | null;
  }>(`select change_rate_per_day, change_observations from ${sampledFrom(total, size)} limit $1`, [size]);
  return {
    total,
    rates: rows.map((r) => r.change_rate_per_day),
    observations: rows.map((r) => r.change_observations),
  };
}

/**
 * Subscribers due now: never planned, or their `next_refresh_at` passed and no claim has moved it
 * on. Two counts the next-due index serves (nulls first, then the range up to now), not the table.
 */
export async function countDue(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ due: number }>(
    `select ((select count(*) from subscribers where next_refresh_at is null)
      + (select count(*) from subscribers where next_refresh_at <= now()))::float8 as due`,
  );
  return rows[0]?.due ?? 0;
}
