import { type JobsOptions, Queue } from 'bullmq';
import { z } from 'zod';
import { SYNC_TRIGGERS, type SyncTrigger } from '../db/schema.js';
import type { Target } from '../src/api/client.js';
import { LANE_PRIORITY, type Lane, promoteRefreshJob } from './lanes.js';
import type { RedisClient } from './redis.js';

export const QUEUE_NAME = 'saved-cards-sync';
export const JOB_NAME = 'sync';

/** The job payload: whom to sync and why. Never a secret. */
export const syncJobSchema = z.object({
  target: z.union([
    z.object({ subscriberId: z.number().int().positive().refine(Number.isSafeInteger) }).strict(),
    z.object({ email: z.string().min(3).max(254) }).strict(),
  ]),
  trigger: z.enum(SYNC_TRIGGERS),
  refreshRunId: z.number().int().positive().optional(),
  /** A refresh's job that a person's request moved into their lane (jobs/lanes.ts). */
  promoted: z.literal(true).optional(),
});
export type SyncJobData = z.infer<typeof syncJobSchema>;

/** What a finished job keeps in Redis: small on purpose. */
export interface SyncJobResult {
  status: string;
  subscriberId: number | null;
  syncRunId: number;
  cardsSeen: number;
  inserted: number;
  updated: number;
  removed: number;
  restored: number;
}

/** One key per subscriber id, one per e-mail ignoring case: the unit of deduplication. */
export function dedupKey(target: Target): string {
  return 'subscriberId' in target
    ? `id:${target.subscriberId}`
    : `email:${target.email.trim().toLowerCase()}`;
}

/** Options of {@link createSyncQueue}. */
export interface SyncQueueOptions {
  /** BullMQ key prefix (`QUEUE_PREFIX`). Default `bull`. */
  prefix?: string;
  /** Attempts for transient failures (`SYNC_ATTEMPTS`). Default 5. */
  attempts?: number;
  /** First retry delay, doubled each attempt; jitter cuts each by up to half. Default 2000 ms. */
  backoffDelayMs?: number;
}

/**
 * Default options of every sync job: retries with exponential backoff and jitter, bounded
 * history so Redis does not grow without end, and no stack trace kept in a failed job (it would
 * show this machine's file paths on the dashboard; the message stays in `failedReason`).
 */
export function defaultJobOptions(attempts: number, backoffDelayMs = 2000): JobsOptions {
  return {
    attempts,
    backoff: { type: 'exponential', delay: backoffDelayMs, jitter: 0.5 },
    removeOnComplete: { age: 24 * 3600, count: 10_000 },
    removeOnFail: { age: 7 * 24 * 3600, count: 50_000 },
    stackTraceLimit: 0,
  };
}

export function createSyncQueue(
  connection: RedisClient,
  options: SyncQueueOptions = {},
): Queue<SyncJobData, SyncJobResult> {
  const queue = new Queue<SyncJobData, SyncJobResult>(QUEUE_NAME, {
    connection,
    prefix: options.prefix ?? 'bull',
    defaultJobOptions: defaultJobOptions(options.attempts ?? 5, options.backoffDelayMs),
  });
  // Connection errors surface through the commands that fail; unheard, BullMQ prints each one
  // as a stack trace.
  queue.on('error', () => {});
  return queue;
}

let sequence = 0;

/** The options of one job: deduplicated per subscriber, run once more if it is running now. */
export function jobOptionsFor(target: Target, refreshRunId?: number, lane?: Lane): JobsOptions {
  const key = dedupKey(target);
  sequence = (sequence + 1) % 1_000_000;
  const priority = LANE_PRIORITY[lane ?? (refreshRunId !== undefined ? 'refresh' : 'ops')];
  return {
    // Our own id, so that a deduplicated add (which answers with the existing job's id) shows.
    // A refresh uses one id per run and subscriber: a fan-out restarted after a crash re-adds its
    // last page, and BullMQ ignores an id it still holds.
    jobId:
      refreshRunId !== undefined
        ? `${key}:r${refreshRunId}`
        : `${key}:${Date.now().toString(36)}${process.pid.toString(36)}${sequence.toString(36)}`,
    deduplication: { id: key, keepLastIfActive: true },
    ...(priority > 0 ? { priority } : {}),
  };
}

export interface EnqueueCounts {
  enqueued: number;
  /** Subscribers that already had a job waiting or running (promoted ones included). */
  alreadyQueued: number;
  /** Of those, jobs a refresh had queued that were moved up into this request's lane. */
  promoted: number;
  /** For each target, the id of the job that will sync it (a new one, or the one already queued). */
  jobIds: string[];
}

/**
 * Adds sync jobs in one round trip; counts those that were new and those already queued. Work a
 * person asked for goes to the ops lane (or `bulk`), and a subscriber already waiting in a refresh
 * is promoted into that lane rather than left behind the refresh's backlog.
 */
export async function enqueueSyncs(
  queue: Queue<SyncJobData, SyncJobResult>,
  targets: readonly Target[],
  trigger: SyncTrigger,
  extra: { refreshRunId?: number; lane?: Lane } = {},
): Promise<EnqueueCounts> {
  if (targets.length === 0) return { enqueued: 0, alreadyQueued: 0, promoted: 0, jobIds: [] };
  const lane = extra.lane ?? (extra.refreshRunId !== undefined ? 'refresh' : 'ops');
  const data = extra.refreshRunId !== undefined ? { refreshRunId: extra.refreshRunId } : {};
  const jobs = targets.map((target) => {
    const opts = jobOptionsFor(target, extra.refreshRunId, lane);
    return { name: JOB_NAME, data: { target, trigger, ...data }, opts };
  });
  const added = await queue.addBulk(jobs);
  let enqueued = 0;
  let promoted = 0;
  const jobIds: string[] = [];
  for (const [i, job] of added.entries()) {
    const id = job.id ?? jobs[i]!.opts.jobId!;
    jobIds.push(id);
    if (id === jobs[i]!.opts.jobId) enqueued++;
    else if (lane !== 'refresh' && (await promoteRefreshJob(queue, id, lane, trigger))) promoted++;
  }
  return { enqueued, alreadyQueued: targets.length - enqueued, promoted, jobIds };
}

/** Where `pause` writes why the queue is paused; `resume` clears it. */
export function pauseReasonKey(prefix: string): string {
  return `${prefix}:${QUEUE_NAME}:cards-sync:pause-reason`;
}

export interface PauseReason {
  reason: string;
  by: 'operator' | 'auth_rejected' | 'breaker';
  at: string;
}

export async function pauseQueue(
  queue: Queue,
  redis: RedisClient,
  reason: Omit<PauseReason, 'at'>,
): Promise<void> {
  await redis.set(
    pauseReasonKey(queue.opts.prefix ?? 'bull'),
    JSON.stringify({ ...reason, at: new Date().toISOString() }),
  );
  await queue.pause();
}

export async function resumeQueue(queue: Queue, redis: RedisClient): Promise<void> {
  await queue.resume();
  await redis.del(pauseReasonKey(queue.opts.prefix ?? 'bull'));
}

export async function readPauseReason(queue: Queue, redis: RedisClient): Promise<PauseReason | undefined> {
  const raw = await redis.get(pauseReasonKey(queue.opts.prefix ?? 'bull'));
  if (raw === null) return undefined;
  try {
    return JSON.parse(raw) as PauseReason;
  } catch {
    return undefined;
  }
}
