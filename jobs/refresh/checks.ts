import type { Queue } from 'bullmq';
import type { Db } from '../../db/client.js';
import { applyTally, haltRefreshRun, loadRefreshRun, type RefreshRun } from '../../db/refresh/index.js';
import type { Logger } from '../../src/logging/index.js';
import type { RedisClient } from '../redis.js';
import { pauseQueue, readTally, type SyncJobData, type SyncJobResult } from '../sync/index.js';
import { hasOutstandingJobs } from './backlog.js';

// What every refresh run checks as it goes, whoever carries it (a refresh job, or the continuous
// refresh's lease holder): its live counts and the wipe breaker, and whether its last job is done.

export interface RunCheckOptions {
  /** Share of wiped subscribers that halts the run (`REFRESH_MAX_WIPE_RATIO`). Default 0.2. */
  maxWipeRatio?: number;
  /** Answers (succeeded or not_found syncs) before the breaker judges. Default 50. */
  breakerMinSyncs?: number;
  /** With no progress for this long, the queue is searched for the run's jobs. Default 60000. */
  stallCheckMs?: number;
}

export interface RunChecks {
  /** Brings the run's counts up to date from the live tally and trips the breaker if needed. */
  check(run: RefreshRun): Promise<RefreshRun>;
  /** Whether the run can be closed: every enqueued job has a final outcome, or nothing is left. */
  allDone(run: RefreshRun): Promise<boolean>;
}

export function createRunChecks(
  deps: { db: Db; logger: Logger; syncQueue: Queue<SyncJobData, SyncJobResult>; redis: RedisClient },
  options: RunCheckOptions = {},
): RunChecks {
  const maxWipeRatio = options.maxWipeRatio ?? 0.2;
  const minSyncs = options.breakerMinSyncs ?? 50;
  const stallCheckMs = options.stallCheckMs ?? 60_000;
  const prefix = deps.syncQueue.opts.prefix ?? 'bull';

  async function check(run: RefreshRun): Promise<RefreshRun> {
    const tally = await readTally(deps.redis, prefix, run.id);
    const now = await applyTally(deps.db, run.id, tally);
    if (now.status !== 'running') return now;
    // A 404 answers too: after SYNC_GONE_AFTER_NOT_FOUND of them a subscriber loses every card, so
    // an API that forgot everyone must trip the breaker even though no sync succeeds.
    const answered = now.succeeded + now.notFound;
    if (!now.breakerOverridden && answered >= minSyncs && now.wipedSubscribers / answered > maxWipeRatio) {
      const share = Math.round((now.wipedSubscribers / answered) * 1000) / 10;
      const reason =
        `${now.wipedSubscribers} of ${answered} answered subscribers (${share}%) lost every card, more than ` +
        `REFRESH_MAX_WIPE_RATIO ${maxWipeRatio}: an upstream outage looks likely. Check the API, then ` +
        '`cards-sync resume` to continue (removals stay in saved_card_changes; a later sync restores them)';
      // The queue is paused first, so that whoever sees the run halted finds the queue paused.
      await pauseQueue(deps.syncQueue, deps.redis, {
        by: 'breaker',
        reason: `refresh run ${run.id} halted: ${reason}`,
      });
      if (await haltRefreshRun(deps.db, run.id, reason)) {
        deps.logger.error(
          { refreshRunId: run.id, wiped: now.wipedSubscribers, answered },
          `refresh halted: ${reason}`,
        );
      }
      return (await loadRefreshRun(deps.db, run.id))!;
    }
    return now;
  }

  let lastFinished = -1;
  let stillSince = Date.now();
  async function allDone(run: RefreshRun): Promise<boolean> {
    const tally = await readTally(deps.redis, prefix, run.id);
    if (tally.finished >= run.enqueued) return true;
    if (tally.finished !== lastFinished) {
      lastFinished = tally.finished;
      stillSince = Date.now();
      return false;
    }
    // No progress for a while: a job may have failed without a final outcome (stalled too often).
    // Then look, once in a while, whether any job of this run is still in the queue.
    if (Date.now() - stillSince < stallCheckMs) return false;
    stillSince = Date.now();
    return !(await hasOutstandingJobs(deps.syncQueue, run.id));
  }

  return { check, allDone };
}
