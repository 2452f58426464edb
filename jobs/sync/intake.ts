import type { Queue } from 'bullmq';
import type { Db } from '../../db/client.js';
import type { SyncTrigger } from '../../db/schema/index.js';
import { registerSubscribers } from '../../db/sync/index.js';
import type { Target } from '../../src/api/index.js';
import { claimLeaseMs } from '../../src/freshness/index.js';
import type { SyncJobData, SyncJobResult } from './job.js';
import type { Lane } from './lanes.js';
import { type EnqueueCounts, enqueueSyncs } from './queue.js';

// "Sync these subscribers", whoever asks: `cards-sync enqueue`, POST /api/resync and the ops
// page's re-sync buttons all come through here, so that each enqueues into the same lanes and
// makes a new id a known subscriber the same way.

/** What one request to sync subscribers did. */
export interface IntakeResult extends EnqueueCounts {
  /** Ids not known before, now known as never synced (db/sync/subscribers.ts `registerSubscribers`). */
  registered: number;
  /**
   * Why the new ids could not be made known, if they could not: they are enqueued all the same and
   * become known at their first sync. The caller says so in its own words.
   */
  registerError?: Error;
}

/**
 * Enqueues the syncs of `targets` (src/api `Target`: ids and e-mails, already checked) in `lane`,
 * then makes each id the queue took a known subscriber, as never synced, placed in the refresh's
 * schedule a claim's lease from now (`refreshMaxAgeMs`: REFRESH_MAX_AGE, for before any plan is
 * stored). `db` undefined: enqueue only (a caller that has already found the database gone).
 */
export async function requestSyncs(
  deps: { syncQueue: Queue<SyncJobData, SyncJobResult>; db: Db | undefined },
  targets: readonly Target[],
  o: { trigger: SyncTrigger; lane: Lane; refreshMaxAgeMs: number },
): Promise<IntakeResult> {
  const counts = await enqueueSyncs(deps.syncQueue, targets, o.trigger, { lane: o.lane });
  // After the queue took them: an id it refused is not made known.
  const refused = new Set(counts.refused.map((r) => r.index));
  const ids = targets.flatMap((t, i) => ('subscriberId' in t && !refused.has(i) ? [t.subscriberId] : []));
  if (deps.db === undefined || ids.length === 0) return { ...counts, registered: 0 };
  try {
    return {
      ...counts,
      registered: await registerSubscribers(deps.db, ids, claimLeaseMs, o.refreshMaxAgeMs),
    };
  } catch (error) {
    return { ...counts, registered: 0, registerError: error as Error };
  }
}
