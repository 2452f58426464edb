import type { Executor } from '../client.js';
import { syncRuns } from '../schema/index.js';

export type NewSyncRun = typeof syncRuns.$inferInsert;

/** Writes one `sync_runs` row and returns its id. */
export async function insertSyncRun(db: Executor, run: NewSyncRun): Promise<number> {
  const [row] = await db.insert(syncRuns).values(run).returning({ id: syncRuns.id });
  return row!.id;
}
