import { and, eq, sql } from 'drizzle-orm';
import type { Executor } from '../client.js';
import { syncRuns } from '../schema.js';

export type NewSyncRun = typeof syncRuns.$inferInsert;

/** Writes one `sync_runs` row and returns its id. */
export async function insertSyncRun(db: Executor, run: NewSyncRun): Promise<number> {
  const [row] = await db.insert(syncRuns).values(run).returning({ id: syncRuns.id });
  return row!.id;
}

/** When the newest successful sync of a subscriber started (its answer is the newest applied). */
export async function newestSuccessStart(db: Executor, subscriberId: number): Promise<Date | null> {
  const [row] = await db
    .select({ at: sql<string | null>`max(${syncRuns.startedAt})::text` })
    .from(syncRuns)
    .where(and(eq(syncRuns.subscriberId, subscriberId), eq(syncRuns.status, 'succeeded')));
  return row?.at ? new Date(row.at) : null;
}

/** Corrects the counts of a run written before its changes were applied. */
export async function updateSyncRunCounts(
  db: Executor,
  id: number,
  counts: { removed: number },
): Promise<void> {
  await db.update(syncRuns).set(counts).where(eq(syncRuns.id, id));
}
