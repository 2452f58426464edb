import type { Queue } from 'bullmq';
import type { Db } from '../db/client.js';
import { resumeHaltedRun, setRefreshJobId } from '../db/ops/refresh-runs.js';
import { resumeBulkLane } from './bulk-breaker.js';
import { type PauseReason, pauseQueue, readPauseReason, resumeQueue } from './queue.js';
import type { RedisClient } from './redis.js';
import type { RefreshJobData } from './refresh.js';
import { REFRESH_PAYLOAD_VERSION } from './refresh-queue.js';

/**
 * What an operator does to the whole queue, from the CLI or the ops page: one code path for both,
 * so that a pause from the browser and one from a shell behave alike.
 */

export type PauseOutcome = { paused: true } | { paused: false; already: PauseReason | undefined };

/**
 * Pauses every worker with a reason. A queue already paused keeps its first reason (it says why
 * processing stopped, which a second pause must not hide) and the caller is told who paused it.
 */
export async function pauseProcessing(
  deps: { syncQueue: Queue; redis: RedisClient },
  reason: string,
): Promise<PauseOutcome> {
  if (await deps.syncQueue.isPaused()) {
    return { paused: false, already: await readPauseReason(deps.syncQueue, deps.redis) };
  }
  await pauseQueue(deps.syncQueue, deps.redis, { by: 'operator', reason });
  return { paused: true };
}

export interface ResumeOutcome {
  wasPaused: boolean;
  /** Why the queue was paused, if it was and the reason was recorded. */
  endedPause: PauseReason | undefined;
  /** The refresh run the breaker had halted and that now continues, if any. */
  continuedRefreshRunId: number | undefined;
  /** The bulk lane (jobs/bulk-breaker.ts): whether its breaker had paused it, and the held jobs sent on. */
  bulkLane: { wasPaused: boolean; released: number };
}

/**
 * Resumes every worker, the bulk lane and the jobs it held, and continues a refresh run the breaker
 * halted (its breaker off for the rest of the run). Returns the id of the run that continues, if any.
 */
export async function resumeProcessing(deps: {
  db: Db;
  syncQueue: Queue;
  refreshQueue: Queue<RefreshJobData>;
  redis: RedisClient;
}): Promise<ResumeOutcome> {
  const wasPaused = await deps.syncQueue.isPaused();
  const endedPause = wasPaused ? await readPauseReason(deps.syncQueue, deps.redis) : undefined;
  await resumeQueue(deps.syncQueue, deps.redis);
  const bulkLane = await resumeBulkLane(deps.syncQueue, deps.redis);
  const run = await resumeHaltedRun(deps.db);
  if (run === undefined) return { wasPaused, endedPause, continuedRefreshRunId: undefined, bulkLane };
  const job = await deps.refreshQueue.add('refresh', {
    v: REFRESH_PAYLOAD_VERSION,
    trigger: run.trigger,
    refreshRunId: run.id,
  });
  if (job.id) await setRefreshJobId(deps.db, run.id, job.id);
  return { wasPaused, endedPause, continuedRefreshRunId: run.id, bulkLane };
}
