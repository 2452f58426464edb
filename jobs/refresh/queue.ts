import { Queue } from 'bullmq';
import { z } from 'zod';
import type { Db } from '../../db/client.js';
import { abandonRefreshRun, type RefreshRun, startRefreshRun } from '../../db/refresh/index.js';
import { REFRESH_TRIGGERS } from '../../db/schema/index.js';
import type { RedisClient } from '../redis.js';

// The refresh queue, its nightly scheduler and the opening of a run; the fan-out is jobs/refresh/nightly.ts.

export const REFRESH_QUEUE_NAME = 'saved-cards-refresh';
export const SCHEDULER_ID = 'nightly-refresh';
export const CONTINUOUS_SCHEDULER_ID = 'continuous-refresh';

/** The version of the refresh payload this release writes (`v`); see SYNC_PAYLOAD_VERSION. */
export const REFRESH_PAYLOAD_VERSION = 1;

export const refreshJobSchema = z.object({
  v: z.number().int().positive().optional(),
  trigger: z.enum(REFRESH_TRIGGERS),
  refreshRunId: z.number().int().positive().optional(),
});
export type RefreshJobData = z.infer<typeof refreshJobSchema>;

export function createRefreshQueue(connection: RedisClient, prefix = 'bull'): Queue<RefreshJobData> {
  const queue = new Queue<RefreshJobData>(REFRESH_QUEUE_NAME, {
    connection,
    prefix,
    defaultJobOptions: {
      attempts: 5,
      backoff: { type: 'exponential', delay: 5000, jitter: 0.5 },
      removeOnComplete: { age: 30 * 24 * 3600, count: 1000 },
      removeOnFail: { age: 30 * 24 * 3600, count: 1000 },
      // As on the sync queue: a failed job keeps its message, not its stack (this machine's paths).
      stackTraceLimit: 0,
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
    { name: 'refresh', data: { v: REFRESH_PAYLOAD_VERSION, trigger: 'nightly' } },
  );
  return (await queue.getJobScheduler(SCHEDULER_ID))?.next;
}

/**
 * REFRESH_MODE=continuous: a job every minute that opens the next window when none is running
 * (each window also opens the next as it closes), and no nightly one. `nightly` undoes it.
 */
export async function registerRefreshMode(
  queue: Queue<RefreshJobData>,
  mode: 'nightly' | 'continuous',
  cron: { pattern: string; tz: string },
): Promise<number | undefined> {
  if (mode === 'nightly') {
    await queue.removeJobScheduler(CONTINUOUS_SCHEDULER_ID);
    return registerNightlyScheduler(queue, cron.pattern, cron.tz);
  }
  await queue.removeJobScheduler(SCHEDULER_ID);
  await queue.upsertJobScheduler(
    CONTINUOUS_SCHEDULER_ID,
    { every: 60_000 },
    { name: 'refresh', data: { v: REFRESH_PAYLOAD_VERSION, trigger: 'continuous' } },
  );
  return (await queue.getJobScheduler(CONTINUOUS_SCHEDULER_ID))?.next;
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
