import type { Queue } from 'bullmq';
import type { Db } from '../../db/client.js';
import { resumeHaltedRun, setRefreshJobId } from '../../db/refresh/index.js';
import type { RedisClient } from '../redis.js';
import {
  type PauseReason,
  pauseQueue,
  readPauseReason,
  restatePauseReason,
  resumeBulkLane,
  resumeQueue,
} from '../sync/index.js';
import type { RefreshJobData } from './queue.js';
import { REFRESH_PAYLOAD_VERSION } from './queue.js';

/**
 * What an operator does to the whole queue, from the CLI or the ops page: one code path for both,
 * so that a pause from the browser and one from a shell behave alike. It lives above jobs/sync/,
 * with the refresh, because a resume also continues the refresh run the breaker halted.
 */

export type PauseOutcome =
  | { paused: true }
  | { paused: false; already: PauseReason | undefined; now: PauseReason };

/**
 * Pauses every worker with a reason, said by `actor`. On a queue already paused, the new reason
 * replaces the shown one: the person pausing again knows more than the first reason said (the
 * incident, the ticket). Nothing is lost: the replaced reasons stay in the record (`earlier`) and
 * in the audit rows, and what paused the queue, when, and a rejected key's process stay as they were.
 */
export async function pauseProcessing(
  deps: { syncQueue: Queue; redis: RedisClient },
  reason: string,
  /** Who asks: the OS user on the CLI, the token's name over HTTP. */
  actor = 'unknown',
): Promise<PauseOutcome> {
  if (await deps.syncQueue.isPaused()) {
    const { before, after } = await restatePauseReason(deps.syncQueue, deps.redis, reason, actor);
    return { paused: false, already: before, now: after };
  }
  await pauseQueue(deps.syncQueue, deps.redis, { by: 'operator', reason, actor });
  return { paused: true };
}

export interface ResumeOutcome {
  wasPaused: boolean;
  /** Why the queue was paused, if it was and the reason was recorded. */
  endedPause: PauseReason | undefined;
  /** The refresh run the breaker had halted and that now continues, if any. */
  continuedRefreshRunId: number | undefined;
  /** The bulk lane (jobs/sync/bulk-breaker.ts): whether its breaker had paused it, and the held jobs sent on. */
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
