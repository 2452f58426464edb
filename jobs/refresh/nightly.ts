import { setTimeout as sleep } from 'node:timers/promises';
import { DelayedError, type Job, type Queue } from 'bullmq';
import { type Db, poolOf } from '../../db/client.js';
import {
  closeRefreshRun,
  loadRefreshRun,
  markFanoutFinished,
  type RefreshRun,
  recordFanoutPage,
  type SweepCursor,
  setRefreshJobId,
  startRefreshRun,
  subscriberPage,
} from '../../db/refresh/index.js';
import type { Logger } from '../../src/logging/index.js';
import type { RedisClient } from '../redis.js';
import {
  createFairShare,
  enqueueSyncs,
  NEWER_PAYLOAD_HOLD_MS,
  newerPayload,
  type SyncJobData,
  type SyncJobResult,
} from '../sync/index.js';
import { refreshBacklog } from './backlog.js';
import { createRunChecks } from './checks.js';
import type { ContinuousOptions } from './continuous.js';
import { planRun } from './plan.js';
import { type RefreshPlanSettings, replan } from './policy.js';
import { openRefreshRun, REFRESH_PAYLOAD_VERSION, type RefreshJobData, refreshJobSchema } from './queue.js';

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
  const pollMs = options.pollMs ?? 1000;

  const { check, allDone } = createRunChecks(deps, options);

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
    if (data.trigger === 'continuous' && options.continuous) {
      // Here the continuous refresh is carried by a lease in Postgres (db/refresh/lease-session.ts),
      // not by a job: its jobs (the minute scheduler's, for older workers) have nothing to do.
      return { skipped: 'the continuous refresh runs under its lease' };
    }
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
    if (run.trigger === 'continuous') {
      await closeRefreshRun(deps.db, run.id);
      return { skipped: 'REFRESH_MODE is not continuous here' };
    }
    if (run.plannedSubscribers === null) {
      // The nightly sweep goes most-likely-changed first: the order is the plan's due times.
      if (options.plan) await replan(poolOf(deps.db), { ...options.plan, mode: 'nightly' }, log);
      run = await planRun({ ...deps, logger: log }, run, options.rateLimitPerSec ?? 0);
    }
    const claimShare = createFairShare(deps.syncQueue, deps.redis, options.floorShare);

    let cursor: SweepCursor = { after: run.cursor, afterDue: run.cursorDue };
    if (run.fanoutFinishedAt === null) {
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
    return { refreshRunId: run.id, status: closed?.status ?? 'completed' };
  };
}
