import { eq, sql } from 'drizzle-orm';
import type { Db, Executor } from '../client.js';
import { subscribers, syncRuns } from '../schema/index.js';

/** The subscriber an e-mail was last seen with, if any (case-insensitive). */
export async function findSubscriberIdByEmail(db: Executor, email: string): Promise<number | undefined> {
  const [row] = await db
    .select({ id: subscribers.subscriberId })
    .from(subscribers)
    .where(sql`lower(${subscribers.email}) = lower(${email})`)
    .limit(1);
  return row?.id;
}

export type NewSyncRun = typeof syncRuns.$inferInsert;

/** Writes one `sync_runs` row and returns its id. */
export async function insertSyncRun(db: Executor, run: NewSyncRun): Promise<number> {
  const [row] = await db.insert(syncRuns).values(run).returning({ id: syncRuns.id });
  return row!.id;
}

/** Records a failed sync on a subscriber that is already known; an unknown one is not created. */
export async function recordSubscriberFailure(
  db: Executor,
  values: { subscriberId: number; status: string; error: string | null; now: Date },
): Promise<void> {
  await db
    .update(subscribers)
    .set({
      lastSyncedAt: values.now,
      lastStatus: values.status,
      lastError: values.error,
      consecutiveFailures: sql`${subscribers.consecutiveFailures} + 1`,
    })
    .where(eq(subscribers.subscriberId, values.subscriberId));
}

/**
 * Makes the subscribers of `ids` that are not known yet known, as never synced: an operator who
 * enqueues a new subscriber has told us it exists, so the freshness estimate counts it (nothing is
 * stored for it: stale for sure) from that moment, not from its first sync, and the continuous
 * refresh takes it in should its job be lost. Its place in the refresh's schedule is a claim's
 * lease from now (`lease` of the max age the refresh's plan was made under, or of
 * `fallbackMaxAgeMs` before any plan), as if the refresh had handed it out itself: the enqueued job
 * is about to sync it, and the refresh takes it only if that has not happened by then. A 404 for
 * one of them forgets it again (db/sync/not-found.ts). Returns how many were new; known ones are
 * left as they are.
 */
export async function registerSubscribers(
  db: Db,
  ids: readonly number[],
  lease: (maxAgeMs: number) => number,
  fallbackMaxAgeMs: number,
): Promise<number> {
  if (ids.length === 0) return 0;
  const client = await db.$client.connect();
  try {
    await client.query('begin');
    const added = await client.query<{ subscriber_id: number }>(
      `insert into subscribers (subscriber_id)
        select distinct id from unnest($1::bigint[]) as t(id) order by id
        on conflict (subscriber_id) do nothing
        returning subscriber_id`,
      [ids],
    );
    const newIds = added.rows.map((r) => r.subscriber_id);
    if (newIds.length > 0) {
      const policy = await client.query<{ max_age_seconds: number }>(
        'select max_age_seconds from refresh_policy where id = 1',
      );
      const maxAgeMs = (policy.rows[0]?.max_age_seconds ?? fallbackMaxAgeMs / 1000) * 1000;
      // The insert's trigger made each one's schedule row, never planned (first in line). The
      // database's clock, as a claim's.
      await client.query(
        `update subscriber_schedule set due_at = now() + make_interval(secs => $2::float8 / 1000)
          where subscriber_id = any($1::bigint[]) and due_at is null`,
        [newIds, lease(maxAgeMs)],
      );
    }
    await client.query('commit');
    return newIds.length;
  } catch (error) {
    await client.query('rollback').catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}
