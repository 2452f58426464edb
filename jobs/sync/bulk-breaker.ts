import type { Job, Queue } from 'bullmq';
import type { RedisClient } from '../redis.js';
import { LANE_PRIORITY } from './lanes.js';
import type { SyncJobData, SyncJobResult } from './queue.js';

// The mass-removal breaker over bulk work. A refresh run has its own breaker
// (jobs/refresh/nightly.ts); a person's large list — `enqueue --file`, a resync request of more than
// BULK_THRESHOLD subscribers — runs in the bulk lane and had none: during an upstream incident that
// answers `[]` for everyone, a 50,000-line file soft-removed 50,000 wallets. Now the bulk lane's
// answers are counted in one-minute buckets shared by every worker; when, over the last
// BULK_WINDOW_MINUTES, at least `minAnswers` bulk answers came in and more than `maxWipeRatio` of
// them removed a whole wallet, the bulk lane pauses. Its jobs are then handed back, held, without
// using an attempt, until `resume`. The ops lane (single re-syncs) and the refresh go on.
//
// What it cannot save: the wallets wiped before it trips (at most `maxWipeRatio` of `minAnswers`,
// plus one more), and the bulk jobs already running in the workers at that moment (up to the
// workers' concurrency in all), whose answers are already on their way.

/** The bulk answers judged: those of the last this many minutes. */
const BULK_WINDOW_MINUTES = 10;

export interface BulkBreakerOptions {
  /** Share of answered bulk syncs that wiped a wallet above which the lane pauses (`REFRESH_MAX_WIPE_RATIO`). Default 0.2. */
  maxWipeRatio?: number;
  /** Answers (succeeded or not_found) before the breaker judges. Default 50. */
  minAnswers?: number;
}

const base = (prefix: string) => `${prefix}:saved-cards-sync:cards-sync:bulk`;
const bucketKey = (prefix: string, minute: number) => `${base(prefix)}:tally:${minute}`;
/** Set while the bulk lane is paused: why, since when, the counts that tripped it. */
export const bulkPauseKey = (prefix: string) => `${base(prefix)}:paused`;
/** The ids of the bulk jobs held while the lane is paused. */
const heldKey = (prefix: string) => `${base(prefix)}:held`;

export interface BulkPause {
  reason: string;
  at: string;
  answered: number;
  wiped: number;
}

/** Whether a job is a person's bulk work: the bulk lane, and not a refresh's own job. */
export function isBulkJob(job: Job<SyncJobData, SyncJobResult>): boolean {
  return job.priority === LANE_PRIORITY.bulk && job.data.refreshRunId === undefined;
}

export async function readBulkPause(redis: RedisClient, prefix: string): Promise<BulkPause | undefined> {
  const raw = await redis.get(bulkPauseKey(prefix));
  if (raw === null) return undefined;
  try {
    return JSON.parse(raw) as BulkPause;
  } catch {
    return { reason: 'paused', at: '', answered: 0, wiped: 0 };
  }
}

/** How many bulk jobs are held. */
export function heldCount(redis: RedisClient, prefix: string): Promise<number> {
  return redis.scard(heldKey(prefix));
}

/**
 * Counts one bulk answer and, for one that wiped a wallet, judges the window: returns the pause
 * when this answer tripped the breaker (the first to do so; later ones find it tripped).
 */
export async function countBulkAnswer(
  redis: RedisClient,
  prefix: string,
  wiped: boolean,
  options: BulkBreakerOptions = {},
  now = Date.now(),
): Promise<BulkPause | undefined> {
  const minute = Math.floor(now / 60_000);
  const key = bucketKey(prefix, minute);
  const multi = redis.multi().hincrby(key, 'answered', 1);
  if (wiped) multi.hincrby(key, 'wiped', 1);
  multi.expire(key, (BULK_WINDOW_MINUTES + 1) * 60);
  await multi.exec();
  // The share can only rise with a wipe: only then is the window read.
  if (!wiped) return undefined;
  const minutes = Array.from({ length: BULK_WINDOW_MINUTES }, (_, i) => minute - i);
  const counts = await Promise.all(
    minutes.map((m) => redis.hmget(bucketKey(prefix, m), 'answered', 'wiped')),
  );
  const answered = counts.reduce((n, [a]) => n + Number(a ?? 0), 0);
  const wipedTotal = counts.reduce((n, [, w]) => n + Number(w ?? 0), 0);
  const ratio = options.maxWipeRatio ?? 0.2;
  if (answered < (options.minAnswers ?? 50) || wipedTotal / answered <= ratio) return undefined;
  const pause: BulkPause = {
    reason:
      `${wipedTotal} of the last ${answered} bulk answers (${BULK_WINDOW_MINUTES} minutes) removed every card of ` +
      `their subscriber, over REFRESH_MAX_WIPE_RATIO ${ratio}: an upstream outage looks likely. ` +
      'Check the API, then run cards-sync resume',
    at: new Date(now).toISOString(),
    answered,
    wiped: wipedTotal,
  };
  const set = await redis.set(bulkPauseKey(prefix), JSON.stringify(pause), 'NX');
  return set === 'OK' ? pause : undefined;
}

/** Notes a job held back while the bulk lane is paused, so that `resume` can send it on. */
export async function holdBulkJob(redis: RedisClient, prefix: string, jobId: string): Promise<void> {
  await redis.sadd(heldKey(prefix), jobId);
}

/**
 * Resumes the bulk lane: clears the pause and the window (the answers that tripped it are judged
 * no more), and sends every held job back to its lane. Returns how many went back.
 */
export async function resumeBulkLane(
  queue: Queue<SyncJobData, SyncJobResult>,
  redis: RedisClient,
): Promise<{ wasPaused: boolean; released: number }> {
  const prefix = queue.opts.prefix ?? 'bull';
  const wasPaused = (await redis.del(bulkPauseKey(prefix))) > 0;
  const minute = Math.floor(Date.now() / 60_000);
  await redis.del(
    ...Array.from({ length: BULK_WINDOW_MINUTES + 1 }, (_, i) => bucketKey(prefix, minute - i)),
  );
  let released = 0;
  const sweep = async () => {
    for (;;) {
      const ids = await redis.spop(heldKey(prefix), 500);
      if (ids.length === 0) return;
      for (const id of ids) {
        const job = await queue.getJob(id);
        if (!job) continue;
        // Held as a delayed job: promoted, it goes back to the bulk lane now.
        await job.promote().then(
          () => released++,
          () => {},
        );
      }
    }
  };
  await sweep();
  // A worker that found the lane paused just before it was resumed may be holding a job still: a
  // second sweep a moment later sends those on too (one it misses waits BULK_HOLD_MS at most).
  await new Promise((resolve) => setTimeout(resolve, 1000));
  await sweep();
  return { wasPaused, released };
}
