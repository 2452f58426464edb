import { setTimeout as sleep } from 'node:timers/promises';
import { DelayedError, type Job, Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import type { Db } from '../db/client.js';
import { rootCause } from '../db/errors.js';
import {
  abandonRefreshRun,
  applyTally,
  closeRefreshRun,
  haltRefreshRun,
  loadRefreshRun,
  markFanoutFinished,
  pruneSyncRuns,
  type RefreshRun,
  recordFanoutPage,
  setRefreshJobId,
  startRefreshRun,
  subscriberPage,
} from '../db/ops/refresh-runs.js';
import { REFRESH_TRIGGERS } from '../db/schema.js';
import type { Logger } from '../src/logger.js';
import { enqueueSyncs, pauseQueue, type SyncJobData, type SyncJobResult } from './queue.js';
import { createRedis } from './redis.js';
import { readTally } from './refresh-tally.js';

export const REFRESH_QUEUE_NAME = 'saved-cards-refresh';
export const SCHEDULER_ID = 'nightly-refresh';

export const refreshJobSchema = z.object({
  trigger: z.enum(REFRESH_TRIGGERS),
  refreshRunId: z.number().int().positive().optional(),
});
export type RefreshJobData = z.infer<typeof refreshJobSchema>;

export function createRefreshQueue(connection: Redis, prefix = 'bull'): Queue<RefreshJobData> {
  const queue = new Queue<RefreshJobData>(REFRESH_QUEUE_NAME, {
    connection,
    prefix,
    defaultJobOptions: {
      attempts: 5,
      backoff: { type: 'exponential', delay: 5000, jitter: 0.5 },
      removeOnComplete: { age: 30 * 24 * 3600, count: 1000 },
      removeOnFail: { age: 30 * 24 * 3600, count: 1000 },
    },
  });
  queue.on('error', () => {});
  return queue;
}

/**
 * Registers (or updates) the one nightly scheduler. Idempotent by id, so any number of worker
 * processes starting at once leave one scheduler, and a changed pattern takes effect on the next
 * start. `pattern` is cron as BullMQ reads it: 5 fields, or 6 with seconds first.
 */
export async function registerNightlyScheduler(
  queue: Queue<RefreshJobData>,
  pattern: string,
  tz: string,
): Promise<number | undefined> {
  await queue.upsertJobScheduler(
    SCHEDULER_ID,
    { pattern, tz },
    { name: 'refresh', data: { trigger: 'nightly' } },
  );
  return (await queue.getJobScheduler(SCHEDULER_ID))?.next;
}

/** True when no refresh is waiting or running (the scheduler's next nightly job is always delayed). */
export async function refreshIsIdle(queue: Queue<RefreshJobData>): Promise<boolean> {
  const c = await queue.getJobCounts('waiting', 'active', 'prioritized');
  return Object.values(c).every((n) => n === 0);
}

const LIVE_STATES = new Set(['active', 'waiting', 'delayed', 'prioritized', 'waiting-children']);

/**
 * Whether an in-progress run still has a job that will carry it on. A halted run waits for an
 * operator and counts as alive; a running one whose job failed for good, or was never queued,
 * does not, and would otherwise block every later refresh.
 */
export async function runIsAlive(queue: Queue<RefreshJobData>, run: RefreshRun): Promise<boolean> {
  if (run.status === 'halted') return true;
  if (run.jobId === null) return Date.now() - run.startedAt.getTime() < 5 * 60_000;
  const job = await queue.getJob(run.jobId);
  if (!job) return false;
  return LIVE_STATES.has(await job.getState());
}

/**
 * Opens a run; a run in progress whose job is gone is marked `abandoned` first, so a crashed
 * refresh never blocks the next one.
 */
export async function openRefreshRun(
  db: Db,
  queue: Queue<RefreshJobData>,
  values: Parameters<typeof startRefreshRun>[1],
  ownJobId?: string,
): Promise<Awaited<ReturnType<typeof startRefreshRun>>> {
  const first = await startRefreshRun(db, values);
  if (
    first.started ||
    first.inProgress.jobId === (ownJobId ?? null) ||
    (await runIsAlive(queue, first.inProgress))
  ) {
    return first;
  }
  await abandonRefreshRun(
    db,
    first.inProgress.id,
    'its refresh job is gone (failed for good or never queued)',
  );
  return startRefreshRun(db, values);
}

/** Tuning of the fan-out. */
export interface RefreshOptions {
  /** Subscribers read and enqueued per page. Default 1000. */
  pageSize?: number;
  /** Most sync jobs left waiting in Redis before the fan-out waits. Default 5000. */
  window?: number;
  /** Share of wiped subscribers that halts the run (`REFRESH_MAX_WIPE_RATIO`). Default 0.2. */
  maxWipeRatio?: number;
  /** Succeeded syncs before the breaker judges. Default 50. */
  breakerMinSyncs?: number;
  /** `SYNC_RUNS_RETENTION_DAYS`, pruned after a nightly run. Default 90. */
  retentionDays?: number;
  /** How often the run checks progress while waiting, ms. Default 1000. */
  pollMs?: number;
  /** With no progress for this long, the queue is searched for the run's jobs. Default 60000. */
  stallCheckMs?: number;
  /** Lock of the refresh job: how soon another process takes over a dead one's fan-out, ms. Default 30000. */
  lockDurationMs?: number;
}

export interface RefreshDeps {
  db: Db;
  logger: Logger;
  syncQueue: Queue<SyncJobData, SyncJobResult>;
  redis: Redis;
  /** The refresh queue, to tell a live run from one whose job is gone. */
  refreshQueue?: Queue<RefreshJobData>;
  /** True once the process is shutting down: the fan-out hands its job back between pages. */
  stopping?: () => boolean;
}

const outstandingStates = ['waiting', 'active', 'delayed', 'prioritized'] as const;

/** Whether any sync job of this run is still waiting, delayed or running. */
async function hasOutstandingJobs(queue: Queue<SyncJobData, SyncJobResult>, runId: number): Promise<boolean> {
  const counts = await queue.getJobCounts(...outstandingStates);
  if (Object.values(counts).every((n) => n === 0)) return false;
  // The backpressure window keeps this scan short.
  for (let start = 0; ; start += 1000) {
    const jobs = await queue.getJobs([...outstandingStates], start, start + 999);
    if (jobs.some((j) => j?.data?.refreshRunId === runId)) return true;
    if (jobs.length < 1000) return false;
  }
}

async function waitingCount(queue: Queue<SyncJobData, SyncJobResult>): Promise<number> {
  const c = await queue.getJobCounts('waiting', 'prioritized', 'delayed');
  return (c.waiting ?? 0) + (c.prioritized ?? 0) + (c.delayed ?? 0);
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
    if (
      !now.breakerOverridden &&
      now.succeeded >= minSyncs &&
      now.wipedSubscribers / now.succeeded > maxWipeRatio
    ) {
      const share = Math.round((now.wipedSubscribers / now.succeeded) * 1000) / 10;
      const reason =
        `${now.wipedSubscribers} of ${now.succeeded} synced subscribers (${share}%) lost every card, more than ` +
        `REFRESH_MAX_WIPE_RATIO ${maxWipeRatio}: an upstream outage looks likely. Check the API, then ` +
        '`cards-sync resume` to continue (removals stay in saved_card_changes; a later sync restores them)';
      // The queue is paused first, so that whoever sees the run halted finds the queue paused.
      await pauseQueue(deps.syncQueue, deps.redis, {
        by: 'breaker',
        reason: `refresh run ${run.id} halted: ${reason}`,
      });
      if (await haltRefreshRun(deps.db, run.id, reason)) {
        deps.logger.error(
          { refreshRunId: run.id, wiped: now.wipedSubscribers, succeeded: now.succeeded },
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
          deps.logger.warn(
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
    log.info({ cursor: run.cursor }, run.cursor > 0 ? 'refresh resumed from its cursor' : 'refresh started');

    let cursor = run.cursor;
    if (run.fanoutFinishedAt === null) {
      for (;;) {
        run = await check(run);
        if (run.status !== 'running') return { refreshRunId: run.id, status: run.status };
        if (deps.stopping?.()) await handBack(job, token);
        if ((await waitingCount(deps.syncQueue)) >= window) {
          await sleep(Math.min(pollMs, 250));
          continue;
        }
        const ids = await subscriberPage(deps.db, cursor, pageSize, run.staleBefore);
        if (ids.length === 0) break;
        const counts = await enqueueSyncs(
          deps.syncQueue,
          ids.map((subscriberId) => ({ subscriberId })),
          run.trigger,
          { refreshRunId: run.id },
        );
        cursor = ids[ids.length - 1]!;
        await recordFanoutPage(deps.db, run.id, { cursor, subscribers: ids.length, ...counts });
        await job.updateProgress({ phase: 'fan-out', cursor, enqueued: run.enqueued + counts.enqueued });
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
      await sleep(pollMs);
    }
    const closed = await closeRefreshRun(deps.db, run.id);
    if (closed) {
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
    if (data.trigger === 'nightly' && options.retentionDays !== undefined) {
      const pruned = await pruneSyncRuns(deps.db, options.retentionDays);
      if (pruned > 0) log.info({ pruned, retentionDays: options.retentionDays }, 'old sync_runs pruned');
    }
    return { refreshRunId: run.id, status: closed?.status ?? 'completed' };
  };
}

/** Starts the refresh worker: one fan-out at a time per process. */
export async function startRefreshWorker(
  deps: RefreshDeps,
  options: RefreshOptions & { redisUrl: string; prefix?: string },
): Promise<{ worker: Worker<RefreshJobData>; close(): Promise<void> }> {
  const connection = createRedis(options.redisUrl, { blocking: true });
  let stopping = false;
  const ownQueue = deps.refreshQueue ? undefined : createRefreshQueue(deps.redis, options.prefix ?? 'bull');
  const refreshQueue = deps.refreshQueue ?? ownQueue!;
  const processor = createRefreshProcessor({ ...deps, refreshQueue, stopping: () => stopping }, options);
  const worker = new Worker<RefreshJobData>(REFRESH_QUEUE_NAME, processor, {
    connection,
    prefix: options.prefix ?? 'bull',
    concurrency: 1,
    maxStalledCount: 5,
    lockDuration: options.lockDurationMs ?? 30_000,
    stalledInterval: Math.max(500, Math.round((options.lockDurationMs ?? 30_000) / 2)),
  });
  worker.on('error', (error) =>
    deps.logger.warn({ err: { message: error.message } }, 'refresh worker connection problem'),
  );
  worker.on('failed', (job, error) => {
    const reason = rootCause(error).message;
    deps.logger.warn({ jobId: job?.id, reason }, 'refresh job failed');
    const runId = job?.data?.refreshRunId;
    if (job && runId !== undefined && job.attemptsMade >= (job.opts.attempts ?? 1)) {
      abandonRefreshRun(deps.db, runId, `its refresh job failed for good: ${reason}`).catch(() => {});
    }
  });
  await worker.waitUntilReady();
  return {
    worker,
    async close() {
      stopping = true;
      await worker.close();
      await ownQueue?.close();
      await connection.quit().catch(() => connection.disconnect());
    },
  };
}
