import { desc, eq, sql } from 'drizzle-orm';
import type { Db } from '../client.js';
import { subscribers, syncRuns } from '../schema/index.js';
import { runColumns } from './subscriber-page.js';

export interface FreshnessBuckets {
  within1h: number;
  within24h: number;
  within7d: number;
  older: number;
  never: number;
  /** No successful sync for `staleAfterHours`, or never. */
  stale: number;
  /** The oldest of the last successes, or null when none has succeeded. */
  oldestSuccessAt: Date | null;
}

/** How many subscribers last synced successfully within 1 h, 24 h, 7 d, longer ago, or never. */
export async function freshnessBuckets(db: Db, staleAfterHours = 36): Promise<FreshnessBuckets> {
  const [row] = (
    await db.execute<{
      h1: number;
      h24: number;
      d7: number;
      older: number;
      never: number;
      stale: number;
      oldest: Date | string | null;
    }>(sql`
      select count(*) filter (where last_success_at > now() - interval '1 hour')::int as h1,
             count(*) filter (where last_success_at <= now() - interval '1 hour' and last_success_at > now() - interval '24 hours')::int as h24,
             count(*) filter (where last_success_at <= now() - interval '24 hours' and last_success_at > now() - interval '7 days')::int as d7,
             count(*) filter (where last_success_at <= now() - interval '7 days')::int as older,
             count(*) filter (where last_success_at is null)::int as never,
             count(*) filter (where last_success_at is null
                              or last_success_at <= now() - make_interval(hours => ${staleAfterHours}))::int as stale,
             min(last_success_at) as oldest
      from subscribers`)
  ).rows;
  return {
    within1h: row?.h1 ?? 0,
    within24h: row?.h24 ?? 0,
    within7d: row?.d7 ?? 0,
    older: row?.older ?? 0,
    never: row?.never ?? 0,
    stale: row?.stale ?? 0,
    oldestSuccessAt: row?.oldest ? new Date(row.oldest) : null,
  };
}

/** One subscriber as the admin API shows it: freshness, card count, last runs; never a token. */
export async function subscriberDetail(db: Db, subscriberId: number) {
  const [subscriber] = await db.select().from(subscribers).where(eq(subscribers.subscriberId, subscriberId));
  const runs = await db
    .select(runColumns)
    .from(syncRuns)
    .where(eq(syncRuns.subscriberId, subscriberId))
    .orderBy(desc(syncRuns.id))
    .limit(10);
  if (subscriber === undefined && runs.length === 0) return undefined;
  return { subscriber: subscriber ?? null, lastRuns: runs };
}

/** When the last refresh completed, for the metrics. */
export async function lastRefreshCompletedAt(db: Db): Promise<Date | null> {
  const [row] = (
    await db.execute<{ at: string | null }>(
      sql`select max(finished_at)::text as at from refresh_runs where status = 'completed'`,
    )
  ).rows;
  return row?.at ? new Date(row.at) : null;
}
