import { sql } from 'drizzle-orm';
import type { Db } from '../client.js';
import { conflictSummary } from '../sync/index.js';

export interface DataStatus {
  subscribers: number;
  syncedWithin24h: number;
  neverSucceeded: number;
  oldestSuccessAt: string | null;
  lastSuccessAt: string | null;
  activeCards: number;
  /** Sync outcomes of the last 24 hours, by status. */
  runsLast24h: Record<string, number>;
  /** Failures of the last 24 hours, by error code, most frequent first. */
  failuresLast24h: { errorCode: string; count: number; lastAt: string }[];
  /** Cards listed by two subscribers at once (card_conflicts): how many now, the oldest since when. */
  conflicts: { open: number; oldestOpenedAt: string | null };
  /**
   * Ids answered `not_found` in the last 24 hours that are no longer subscribers: an enqueued id
   * the API did not know is forgotten again (db/sync/not-found.ts), so the count above falls.
   */
  forgottenLast24h: number;
}

/** ISO 8601 (UTC, `Z`) of a timestamp Postgres returned, whatever shape the driver gave it. */
const iso = (v: Date | string | null | undefined): string | null =>
  v === null || v === undefined ? null : new Date(v).toISOString();

/** Freshness and recent outcomes, for `cards-sync status` (times in ISO 8601). */
export async function readDataStatus(db: Db): Promise<DataStatus> {
  const [fresh] = (
    await db.execute<{
      subscribers: number;
      synced_within_24h: number;
      never_succeeded: number;
      oldest_success_at: Date | string | null;
      last_success_at: Date | string | null;
      active_cards: number;
    }>(sql`
      select count(*)::int as subscribers,
             count(*) filter (where last_success_at > now() - interval '24 hours')::int as synced_within_24h,
             count(*) filter (where last_success_at is null)::int as never_succeeded,
             min(last_success_at) as oldest_success_at,
             max(last_success_at) as last_success_at,
             coalesce(sum(active_cards), 0)::int as active_cards
      from subscribers`)
  ).rows;
  const runs = await db.execute<{ status: string; n: number }>(sql`
    select status, count(*)::int as n from sync_runs
    where started_at > now() - interval '24 hours' group by status order by status`);
  const failures = await db.execute<{ error_code: string; n: number; last_at: Date | string }>(sql`
    select error_code, count(*)::int as n, max(finished_at) as last_at from sync_runs
    where started_at > now() - interval '24 hours' and status <> 'succeeded' and error_code is not null
    group by error_code order by n desc, error_code limit 10`);
  const conflicts = await conflictSummary(db);
  const forgotten = await db.execute<{ n: number }>(sql`
    select count(distinct r.subscriber_id)::int as n from sync_runs r
    where r.started_at > now() - interval '24 hours' and r.status = 'not_found'
      and r.subscriber_id is not null
      and not exists (select 1 from subscribers s where s.subscriber_id = r.subscriber_id)`);
  return {
    subscribers: fresh?.subscribers ?? 0,
    syncedWithin24h: fresh?.synced_within_24h ?? 0,
    neverSucceeded: fresh?.never_succeeded ?? 0,
    oldestSuccessAt: iso(fresh?.oldest_success_at),
    lastSuccessAt: iso(fresh?.last_success_at),
    activeCards: fresh?.active_cards ?? 0,
    runsLast24h: Object.fromEntries(runs.rows.map((r) => [r.status, r.n])),
    failuresLast24h: failures.rows.map((r) => ({
      errorCode: r.error_code,
      count: r.n,
      lastAt: iso(r.last_at) ?? '',
    })),
    conflicts: { open: conflicts.open, oldestOpenedAt: iso(conflicts.oldestOpenedAt) },
    forgottenLast24h: forgotten.rows[0]?.n ?? 0,
  };
}
