import { type JobsOptions, Queue } from 'bullmq';
import type { SyncTrigger } from '../../db/schema/index.js';
import type { Target } from '../../src/api/index.js';
import { tracing } from '../../src/tracing/index.js';
import type { RedisClient } from '../redis.js';
import type { SyncJobData, SyncJobResult } from './job.js';
import { QUEUE_NAME } from './job.js';
import { dedupKey, emailIdKey } from './job-ids.js';
import { LANE_PRIORITY, type Lane, promoteRefreshJob } from './lanes.js';

export { type SyncJobData, type SyncJobResult, syncJobSchema } from './job.js';
// Why the queue is paused lives in its own module; these names stay importable from here.
export {
  readPauseReason,
  resumeQueue,
} from './pause-record.js';
export { QUEUE_NAME };
export const JOB_NAME = 'sync';

/**
 * The version of the payload this release writes (`v`). A worker meeting a newer one hands the job
 * back unused (jobs/sync/job.ts); a payload without `v` is from a release before versions.
 */
export const SYNC_PAYLOAD_VERSION = 1;

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
function defaultJobOptions(attempts: number, backoffDelayMs = 2000): JobsOptions {
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
  const telemetry = tracing().queueTelemetry();
  const queue = new Queue<SyncJobData, SyncJobResult>(QUEUE_NAME, {
    connection,
    prefix: options.prefix ?? 'bull',
    // While tracing is on, each job carries its trace context in its options (not in `data`, whose
    // shape is versioned): an older worker ignores it.
    ...(telemetry ? { telemetry } : {}),
    defaultJobOptions: defaultJobOptions(options.attempts ?? 5, options.backoffDelayMs),
  });
  // Connection errors surface through the commands that fail; unheard, BullMQ prints each one
  // as a stack trace.
  queue.on('error', () => {});
  connections.set(queue, connection);
  return queue;
}

/** The connection each sync queue was made with: where the e-mail hash's key is read. */
const connections = new WeakMap<Queue, RedisClient>();

function connectionOf(queue: Queue): RedisClient {
  const connection = connections.get(queue);
  if (!connection) throw new Error('a sync queue must be made by createSyncQueue');
  return connection;
}

let sequence = 0;

/**
 * The options of one job: deduplicated per subscriber, run once more if it is running now.
 * `emailKey` hashes an e-mail into the ids (jobs/sync/job-ids.ts).
 */
function jobOptionsFor(
  target: Target,
  emailKey: Buffer,
  refreshRunId?: number,
  lane?: Lane,
  claim?: number,
): JobsOptions {
  const key = dedupKey(target, emailKey);
  sequence = (sequence + 1) % 1_000_000;
  const priority = LANE_PRIORITY[lane ?? (refreshRunId !== undefined ? 'refresh' : 'ops')];
  return {
    // Our own id, so that a deduplicated add (which answers with the existing job's id) shows.
    // A refresh uses one id per run and subscriber: a fan-out restarted after a crash re-adds its
    // last page, and BullMQ ignores an id it still holds. A continuous window may sync one
    // subscriber twice (a busy one, or an audit of one just synced): each claim has its number.
    jobId:
      refreshRunId !== undefined
        ? `${key}:r${refreshRunId}${claim !== undefined ? `.${claim}` : ''}`
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
  /**
   * For each target, the id of the job that will sync it (a new one, or the one already queued);
   * an empty string for a target Redis refused.
   */
  jobIds: string[];
  /** Targets Redis refused, by their index in `targets`, each with its reason; the others went in. */
  refused: { index: number; reason: string }[];
}

type NewJob = { name: string; data: SyncJobData; opts: JobsOptions };

/**
 * Adds the jobs in one round trip. Should that fail, they are added one by one, so that one job
 * Redis or BullMQ refuses (an id it will not take, a payload over a limit) refuses only its own
 * target: every other one still goes in. When every one fails as the whole did (Redis is away),
 * that failure is thrown.
 */
async function addEach(queue: Queue<SyncJobData, SyncJobResult>, jobs: NewJob[]) {
  try {
    return { added: await queue.addBulk(jobs), refused: [] };
  } catch (bulkError) {
    const added: ({ id?: string | undefined } | undefined)[] = [];
    const refused: { index: number; reason: string }[] = [];
    for (const [index, job] of jobs.entries()) {
      try {
        added.push(await queue.add(job.name, job.data, job.opts));
      } catch (error) {
        added.push(undefined);
        refused.push({ index, reason: `the queue refused it: ${(error as Error).message}` });
      }
    }
    if (
      refused.length === jobs.length &&
      refused.every((r) => r.reason.endsWith((bulkError as Error).message))
    )
      throw bulkError;
    return { added, refused };
  }
}

/**
 * Adds sync jobs in one round trip; counts those that were new and those already queued. Work a
 * person asked for goes to the ops lane (or `bulk`), and a subscriber already waiting in a refresh
 * is promoted into that lane rather than left behind the refresh's backlog. A target the queue
 * refuses is reported in `refused` and never fails the others.
 */
export async function enqueueSyncs(
  queue: Queue<SyncJobData, SyncJobResult>,
  targets: readonly Target[],
  trigger: SyncTrigger,
  extra: { refreshRunId?: number; lane?: Lane; firstClaim?: number } = {},
): Promise<EnqueueCounts> {
  if (targets.length === 0) return { enqueued: 0, alreadyQueued: 0, promoted: 0, jobIds: [], refused: [] };
  const lane = extra.lane ?? (extra.refreshRunId !== undefined ? 'refresh' : 'ops');
  // Starts each sync's trace (or continues the caller's: a resync request's); the jobs carry it.
  return tracing().inSpan(
    'cards_sync.enqueue',
    {
      kind: 'producer',
      attributes: {
        'cards_sync.trigger': trigger,
        'cards_sync.lane': lane,
        'cards_sync.targets': targets.length,
        'cards_sync.refresh_run_id': extra.refreshRunId,
      },
    },
    async (span) => {
      const counts = await addSyncs(queue, targets, trigger, lane, extra);
      span.set({
        'cards_sync.enqueued': counts.enqueued,
        'cards_sync.already_queued': counts.alreadyQueued,
        'cards_sync.promoted': counts.promoted,
        'cards_sync.refused': counts.refused.length,
      });
      return counts;
    },
  );
}

async function addSyncs(
  queue: Queue<SyncJobData, SyncJobResult>,
  targets: readonly Target[],
  trigger: SyncTrigger,
  lane: Lane,
  extra: { refreshRunId?: number; firstClaim?: number },
): Promise<EnqueueCounts> {
  const data = extra.refreshRunId !== undefined ? { refreshRunId: extra.refreshRunId } : {};
  const emailKey = targets.some((t) => 'email' in t)
    ? await emailIdKey(connectionOf(queue), queue.opts.prefix ?? 'bull')
    : Buffer.alloc(0);
  const jobs: NewJob[] = targets.map((target, i) => {
    const claim = extra.firstClaim !== undefined ? extra.firstClaim + i : undefined;
    const opts: JobsOptions = {
      ...jobOptionsFor(target, emailKey, extra.refreshRunId, lane, claim),
      // A refresh's or a file's thousands of syncs are a trace each (found by their refresh run
      // id), not spans of one trace too large to read; a person's request is one trace.
      ...(lane !== 'ops' && queue.opts.telemetry ? { telemetry: { omitContext: true } } : {}),
    };
    return { name: JOB_NAME, data: { v: SYNC_PAYLOAD_VERSION, target, trigger, ...data }, opts };
  });
  const { added, refused } = await addEach(queue, jobs);
  let enqueued = 0;
  let promoted = 0;
  const jobIds: string[] = [];
  for (const [i, job] of added.entries()) {
    if (job === undefined) {
      jobIds.push('');
      continue;
    }
    const id = job.id ?? jobs[i]!.opts.jobId!;
    jobIds.push(id);
    if (id === jobs[i]!.opts.jobId) enqueued++;
    else if (lane !== 'refresh' && (await promoteRefreshJob(queue, id, lane, trigger))) promoted++;
  }
  return { enqueued, alreadyQueued: targets.length - enqueued - refused.length, promoted, jobIds, refused };
}
