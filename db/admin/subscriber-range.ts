import { sql } from 'drizzle-orm';
import type { Db } from '../client.js';

// Reports over a range of subscriber ids since a moment (the demo's "what landed": one run's syncs
// of its own subscribers, nothing older and nothing else that shares the database).

export interface SubscriberRange {
  firstId: number;
  lastId: number;
  /** Runs started before this are not counted. */
  since: Date;
}

/** The range's runs since `since`, by status: `{ status, syncs }`, the most frequent first. */
export async function runsByStatus(db: Db, range: SubscriberRange): Promise<Record<string, unknown>[]> {
  const ids = sql`subscriber_id between ${range.firstId} and ${range.lastId}`;
  const runs = await db.execute(sql`
    select status, count(*)::int as syncs from sync_runs
    where ${ids} and started_at >= ${range.since.toISOString()}::timestamptz
    group by 1 order by 2 desc, 1`);
  return runs.rows;
}

/** The range's active cards by bank: `{ bank, active_cards }`, the most frequent first. */
export async function activeCardsByBank(db: Db, range: SubscriberRange): Promise<Record<string, unknown>[]> {
  const ids = sql`subscriber_id between ${range.firstId} and ${range.lastId}`;
  const perBank = await db.execute(sql`
    select card_bank_name as bank, count(*)::int as active_cards from saved_cards_active
    where ${ids} group by 1 order by 2 desc, 1`);
  return perBank.rows;
}

/** What each bucket of {@link freshnessByBucket} is called (the caller's words). */
export interface FreshnessLabels {
  notFound: string;
  within1h: string;
  over1h: string;
  never: string;
}

/**
 * Each subscriber id of the range in one bucket: one whose last answer since `since` was a 404 is
 * `notFound` (it may have no `subscribers` row at all: an unknown id gets its run only), the others
 * by their last success. Buckets nobody falls in are absent.
 */
export async function freshnessByBucket(
  db: Db,
  range: SubscriberRange,
  label: FreshnessLabels,
): Promise<{ bucket: string; n: number }[]> {
  const { rows } = await db.execute<{ bucket: string; n: number }>(sql`
    with ids as (
      select generate_series(${range.firstId}::bigint, ${range.lastId}::bigint) as subscriber_id
    ), last_answer as (
      select distinct on (subscriber_id) subscriber_id, status from sync_runs
      where subscriber_id between ${range.firstId} and ${range.lastId}
        and started_at >= ${range.since.toISOString()}::timestamptz
      order by subscriber_id, id desc
    )
    select case
        when a.status = 'not_found' then ${label.notFound}
        when s.last_success_at > now() - interval '1 hour' then ${label.within1h}
        when s.last_success_at is not null then ${label.over1h}
        else ${label.never} end as bucket,
      count(*)::int as n
    from ids i left join subscribers s using (subscriber_id) left join last_answer a using (subscriber_id)
    group by 1`);
  return rows;
}
