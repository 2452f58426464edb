import { setTimeout as sleep } from 'node:timers/promises';
import { DelayedError, type Job, type Queue } from 'bullmq';
import type { Db } from '../db/client.js';
import {
  applyTally,
  closeRefreshRun,
  haltRefreshRun,
  loadRefreshRun,
  markFanoutFinished,
  type RefreshRun,
  recordFanoutPage,
  type SweepCursor,
  savePlan,
  setRefreshJobId,
  startRefreshRun,
  subscriberPage,
} from '../db/ops/refresh-runs.js';
import type { Logger } from '../src/logger.js';
import { type ContinuousOptions, continuousFanout } from './continuous-refresh.js';
import { createFairShare } from './lanes.js';
import { NEWER_PAYLOAD_HOLD_MS, newerPayload } from './payload-version.js';
import { enqueueSyncs, pauseQueue, type SyncJobData, type SyncJobResult } from './queue.js';
import type { RedisClient } from './redis.js';
import { hasOutstandingJobs, refreshBacklog } from './refresh-backlog.js';
import { planRun } from './refresh-plan.js';
import { type RefreshPlanSettings, replan } from './refresh-policy.js';
import {
  openRefreshRun,
  REFRESH_PAYLOAD_VERSION,
  type RefreshJobData,
  refreshJobSchema,
} from './refresh-queue.js';
import { readTally } from './refresh-tally.js';

export { refreshBacklog } from './refresh-backlog.js';
export * from './refresh-queue.js';
export { startRefreshWorker } from './refresh-worker.js';

/** Tuning of the fan-out. */
export interface RefreshOptions {
  /** Subscribers read and enqueued per page. Default 1000. */
  pageSize?: number;
  /** Most sync jobs left waiting in Redis before the fan-out waits. Default 5000. */
  window?: number;
  /** Share of wiped subscribers that halts the run (`REFRESH_MAX_WIPE_RATIO`). Default 0.2. */
  maxWipeRatio?: number;
  /** Answers (succeeded or not_found syncs) before the breaker judges. Default 50. */
  breakerMinSyncs?: number;
  /** How often the run checks progress while waiting, ms. Default 1000. */
  pollMs?: number;
  /** With no progress for this long, the queue is searched for the run's jobs. Default 60000. */
  stallCheckMs?: number;
  /** Lock of the refresh job: how soon another process takes over a dead one's fan-out, ms. Default 30000. */
  lockDurationMs?: number;
  /** `SYNC_RATE_LIMIT_PER_SEC`, to plan the run within the budget; 0 = none. Default 0. */
  rateLimitPerSec?: number;
  /** The refresh's share of the slots while ops work is served. Default `REFRESH_FLOOR_SHARE` (0.2). */
  floorShare?: number;
  /** REFRESH_MODE=continuous: its budget, audit share, max age and window. */
  continuous?: ContinuousOptions;
  /** The settings the shared plan is made for (nightly runs make it again as they begin). */
  plan?: RefreshPlanSettings;
}

export interface RefreshDeps {
  db: Db;
  logger: Logger;
  syncQueue: Queue<SyncJobData, SyncJobResult>;
  redis: RedisClient;
  /** The refresh queue, to tell a live run from one whose job is gone. */
  refreshQueue?: Queue<RefreshJobData>;
  /** True once the process is shutting down: the fan-out hands its job back between pages. */
  stopping?: () => boolean;
}

/**
 * The refresh processor: opens (or resumes) a run, walks `subscribers` by keyset pages into the
 * sync queue with backpressure, watches the breaker, waits for the run's last job, then closes
 * the run with its counts. A process that dies mid-way leaves the cursor behind; the retried job
 * continues from it.
 */
export function createRefreshProcessor(deps: RefreshDeps, options: RefreshOptions = {}) {
  const pageSize = options.pageSize ?? 1000;
  const window = options.window ?? 5000;
  const maxWipeRatio = options.maxWipeRatio ?? 0.2;
  const minSyncs = options.breakerMinSyncs ?? 50;
  const pollMs = options.pollMs ?? 1000;
  const stallCheckMs = options.stallCheckMs ?? 60_000;

  const prefix = deps.syncQueue.opts.prefix ?? 'bull';

  /** Brings the run's counts up to date from the live tally and trips the breaker if needed. */
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

  /** Whether the run can be closed: every enqueued job has a final outcome, or nothing is left. */
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

  /** Shutdown: the job goes back to the queue (delayed 1 s) and any worker continues from the cursor. */
  async function handBack(job: Job<RefreshJobData>, token: string | undefined): Promise<never> {
    await job.moveToDelayed(Date.now() + 1000, token);
    throw new DelayedError();
  }

  return async (job: Job<RefreshJobData>, token?: string) => {
    const newer = newerPayload(job.data, REFRESH_PAYLOAD_VERSION);
    if (newer !== undefined) {
      deps.logger.warn(
        { jobId: job.id, payloadVersion: newer, knownVersion: REFRESH_PAYLOAD_VERSION },
        'a refresh job from a newer release: handed back for a newer worker',
      );
      await job.moveToDelayed(Date.now() + NEWER_PAYLOAD_HOLD_MS, token);
      throw new DelayedError();
    }
    const data = refreshJobSchema.parse(job.data);
    let run: RefreshRun | undefined;
    if (data.refreshRunId !== undefined) {
      run = await loadRefreshRun(deps.db, data.refreshRunId);
      if (run === undefined || run.status !== 'running')
        return { skipped: `run ${data.refreshRunId} is ${run?.status ?? 'gone'}` };
    } else {
      const started = deps.refreshQueue
        ? await openRefreshRun(deps.db, deps.refreshQueue, { trigger: data.trigger, jobId: job.id }, job.id)
        : await startRefreshRun(deps.db, { trigger: data.trigger, jobId: job.id });
      if (!started.started) {
        // The same job retried after its process died: carry on with the run it opened.
        if (started.inProgress.jobId !== job.id) {
          // A continuous window's minute tick finds the window running nearly always: not news.
          deps.logger[data.trigger === 'continuous' ? 'debug' : 'warn'](
            { refreshRunId: started.inProgress.id },
            'refresh not started: another run is in progress',
          );
          return { skipped: `run ${started.inProgress.id} is in progress` };
        }
        run = started.inProgress;
      } else {
        run = started.run;
      }
      await job.updateData({ ...data, refreshRunId: run.id });
    }
    if (job.id) await setRefreshJobId(deps.db, run.id, job.id);
    const log = deps.logger.child({ refreshRunId: run.id, trigger: run.trigger });
    log.info(
      { cursor: run.cursor },
      run.cursor > 0 || run.cursorDue !== null ? 'refresh resumed from its cursor' : 'refresh started',
    );
    const continuous = run.trigger === 'continuous' ? options.continuous : undefined;
    if (run.trigger === 'continuous' && continuous === undefined) {
      await closeRefreshRun(deps.db, run.id);
      return { skipped: 'REFRESH_MODE is not continuous here' };
    }
    if (run.plannedSubscribers === null) {
      if (continuous) {
        run = await planWindow(deps.db, run, continuous);
      } else {
        // The nightly sweep goes most-likely-changed first: the order is the plan's due times.
        if (options.plan) await replan(deps.db.$client, { ...options.plan, mode: 'nightly' }, log);
        run = await planRun({ ...deps, logger: log }, run, options.rateLimitPerSec ?? 0);
      }
    }
    const claimShare = createFairShare(deps.syncQueue, deps.redis, options.floorShare);

    let cursor: SweepCursor = { after: run.cursor, afterDue: run.cursorDue };
    if (run.fanoutFinishedAt === null && continuous) {
      run = await continuousFanout({ ...deps, logger: log }, job, run, continuous, {
        check,
        claimShare,
        backlog: () => refreshBacklog(deps.syncQueue, deps.redis),
        stopping: () => deps.stopping?.() ?? false,
        handBack: () => handBack(job, token),
      });
      if (run.status !== 'running') return { refreshRunId: run.id, status: run.status };
      await markFanoutFinished(deps.db, run.id);
    }
    if (run.fanoutFinishedAt === null && !continuous) {
      for (;;) {
        run = await check(run);
        if (run.status !== 'running') return { refreshRunId: run.id, status: run.status };
        if (deps.stopping?.()) await handBack(job, token);
        await claimShare();
        if ((await refreshBacklog(deps.syncQueue, deps.redis)) >= window) {
          await sleep(Math.min(pollMs, 250));
          continue;
        }
        const page = await subscriberPage(deps.db, cursor, pageSize, run.staleBefore, run.startedAt);
        const ids = page.ids;
        if (ids.length === 0) break;
        const counts = await enqueueSyncs(
          deps.syncQueue,
          ids.map((subscriberId) => ({ subscriberId })),
          run.trigger === 'manual' ? 'manual' : 'nightly',
          { refreshRunId: run.id },
        );
        cursor = page.cursor;
        if (counts.refused.length > 0) {
          // A subscriber whose job the queue would not take is skipped this run, not the run itself.
          log.warn(
            { refused: counts.refused.length, reason: counts.refused[0]!.reason },
            'the queue refused some of the refresh jobs; those subscribers are skipped this run',
          );
        }
        await recordFanoutPage(deps.db, run.id, {
          cursor,
          subscribers: ids.length,
          enqueued: counts.enqueued,
          alreadyQueued: counts.alreadyQueued,
        });
        await job.updateProgress({
          phase: 'fan-out',
          cursor: cursor.after,
          enqueued: run.enqueued + counts.enqueued,
        });
      }
      await markFanoutFinished(deps.db, run.id);
      log.info('refresh fan-out finished; waiting for its last jobs');
    }
    for (;;) {
      run = await check(run);
      if (run.status !== 'running') return { refreshRunId: run.id, status: run.status };
      await job.updateProgress({ phase: 'finishing', succeeded: run.succeeded, failed: run.failed });
      if (await allDone(run)) break;
      if (deps.stopping?.()) await handBack(job, token);
      await claimShare();
      await sleep(pollMs);
    }
    const closed = await closeRefreshRun(deps.db, run.id);
    if (closed?.status === 'empty') {
      log.warn('refresh matched no subscriber: nothing was synced, and it does not count as a success');
    } else if (closed) {
      log.info(
        {
          total: closed.subscribersTotal,
          succeeded: closed.succeeded,
          failed: closed.failed,
          notFound: closed.notFound,
          invalid: closed.invalid,
        },
        'refresh completed',
      );
    }
    if (continuous && deps.refreshQueue && !deps.stopping?.()) {
      // The next window begins at once (the job scheduler would start it within a minute anyway).
      await deps.refreshQueue.add('refresh', { v: REFRESH_PAYLOAD_VERSION, trigger: 'continuous' });
    }
    return { refreshRunId: run.id, status: closed?.status ?? 'completed' };
  };
}

/** A continuous window's plan: its budget for its length. */
async function planWindow(db: Db, run: RefreshRun, o: ContinuousOptions): Promise<RefreshRun> {
  const windowMs = o.windowMs ?? 3_600_000;
  return savePlan(db, run.id, {
    plannedSubscribers: Math.round((o.budgetPerSec * windowMs) / 1000),
    rateBudgetPerSec: Math.ceil(o.budgetPerSec),
    expectedFinishAt: new Date(run.startedAt.getTime() + windowMs),
    nextRefreshAt: null,
  });
}
