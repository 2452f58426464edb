import type { Queue } from 'bullmq';
import type { SyncTrigger } from '../../db/schema/index.js';
import type { RedisClient } from '../redis.js';
import type { SyncJobData, SyncJobResult } from './job.js';

/**
 * Lanes of the one sync queue. A BullMQ worker takes the next job from the wait list first and
 * only then the lowest priority number of the prioritized set, so:
 *
 * - `ops`: work a person asked for (`enqueue --id/--email`, `POST /api/resync`, the ops page) goes
 *   to the wait list, ahead of everything else, in the order asked;
 * - `bulk`: a person's large list (`enqueue --file`, a resync request of more than
 *   {@link BULK_THRESHOLD} subscribers) comes next, so that one big file does not hold up the
 *   next single re-sync;
 * - `refresh`: the nightly (or a manual) refresh's fan-out comes last.
 *
 * Every lane shares the one rate limit (`SYNC_RATE_LIMIT_PER_SEC`): a lane changes the order of
 * the slots, never their number. So that a flood of ops work cannot starve a refresh, the running
 * refresh moves some of its own jobs to the head of the queue while ops work is being served:
 * {@link REFRESH_FLOOR_SHARE} of the slots (see {@link createFairShare}).
 */
export type Lane = 'ops' | 'bulk' | 'refresh';

/** BullMQ priority of each lane (0 = the wait list, served before any prioritized job). */
export const LANE_PRIORITY: Record<Lane, number> = { ops: 0, bulk: 1, refresh: 8 };

/** A resync request naming more subscribers than this goes to the `bulk` lane. */
export const BULK_THRESHOLD = 100;

/** The refresh's share of the slots while ops work is being served. */
const REFRESH_FLOOR_SHARE = 0.2;

const OPS_TRIGGERS: ReadonlySet<SyncTrigger> = new Set(['manual', 'api', 'cli']);

/** Whether a job serves a person: theirs, or a refresh's job promoted for them (a manual refresh's own jobs are not). */
export function isOpsJob(data: SyncJobData): boolean {
  return data.refreshRunId === undefined ? OPS_TRIGGERS.has(data.trigger) : data.promoted === true;
}

// `:r<run>`, or `:r<run>.<claim>` for a continuous window, which may sync a subscriber more than once.
const REFRESH_JOB_ID = /:r(\d+)(\.\d+)?$/;

/**
 * Moves a job a refresh queued into a person's lane (the ops request is served by it: the
 * subscriber still syncs once). Its trigger becomes the person's, its refresh run stays, so the
 * run still counts it. A job already running, finished or in a lane as fast is left alone: the
 * dedup rule already runs a running one once more. Returns whether it moved.
 */
export async function promoteRefreshJob(
  queue: Queue<SyncJobData, SyncJobResult>,
  jobId: string,
  lane: Exclude<Lane, 'refresh'>,
  trigger: SyncTrigger,
): Promise<boolean> {
  if (!REFRESH_JOB_ID.test(jobId)) return false;
  const job = await queue.getJob(jobId);
  if (!job) return false;
  const state = await job.getState();
  const priority = LANE_PRIORITY[lane];
  if (state !== 'prioritized' && state !== 'delayed') return false;
  if (state === 'prioritized' && (job.priority ?? 0) <= priority) return false;
  try {
    await job.updateData({ ...job.data, trigger, promoted: true });
    await job.changePriority({ priority });
    // A retry waiting out its backoff: the person asked for it now.
    if (state === 'delayed') await job.promote();
  } catch {
    // It started (or finished) in the meantime: it syncs after the request all the same.
    return false;
  }
  return true;
}

/** Counts the ops jobs the workers have started, so that the refresh can claim its share. */
export function opsServedKey(prefix: string): string {
  return `${prefix}:saved-cards-sync:cards-sync:ops-served`;
}

/** How long the ops jobs started in a process are counted locally before one INCRBY sends them. */
const OPS_COUNT_FLUSH_MS = 100;

/**
 * Counts the ops jobs this process starts, one INCRBY per {@link OPS_COUNT_FLUSH_MS} for all of
 * them: a command per job cost the worker as much CPU as the job's own request to the API. The
 * refresh reads the count on its fan-out tick (every 250 ms at least), so a count a tenth of a
 * second late moves its share a tenth of a second later. A failed send is dropped: the share is
 * a floor, not a ledger.
 */
export function opsServedCounter(redis: RedisClient, prefix: string, flushMs = OPS_COUNT_FLUSH_MS) {
  const key = opsServedKey(prefix);
  let unsent = 0;
  let timer: NodeJS.Timeout | undefined;
  const flush = () => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    const n = unsent;
    unsent = 0;
    return n > 0
      ? redis.incrby(key, n).then(
          () => undefined,
          () => undefined,
        )
      : Promise.resolve();
  };
  return {
    add(): void {
      unsent++;
      timer ??= setTimeout(flush, flushMs);
    },
    flush,
  };
}

/**
 * The refresh's floor: for every ops job served since the last call, the refresh is owed
 * `share / (1 − share)` slots (one in four ops jobs at 20%), paid by moving its oldest waiting jobs
 * to the head of the wait list. With no ops work, nothing moves and the refresh has every slot.
 * Called by the one process running the refresh's fan-out, on each tick.
 */
export function createFairShare(
  queue: Queue<SyncJobData, SyncJobResult>,
  redis: RedisClient,
  share = REFRESH_FLOOR_SHARE,
) {
  const prefix = queue.opts.prefix ?? 'bull';
  const low = LANE_PRIORITY.refresh * 0x100000000;
  const high = (LANE_PRIORITY.refresh + 1) * 0x100000000 - 1;
  let lastServed: number | undefined;
  let owed = 0;
  return async function claim(): Promise<number> {
    const served = Number((await redis.get(opsServedKey(prefix))) ?? 0);
    const delta = lastServed === undefined ? 0 : served - lastServed;
    lastServed = served;
    if (delta <= 0 || share <= 0) return 0;
    owed += (delta * share) / (1 - share);
    const want = Math.floor(owed);
    if (want === 0) return 0;
    const ids = await redis.zrangebyscore(queue.keys.prioritized!, low, high, 'LIMIT', 0, want);
    let moved = 0;
    for (const id of ids) {
      const job = await queue.getJob(id);
      if (!job) continue;
      // lifo: to the head of the wait list, ahead of the ops backlog.
      await job.changePriority({ priority: 0, lifo: true }).then(
        () => moved++,
        () => {},
      );
    }
    // With fewer refresh jobs waiting than owed, the debt is forgiven: nothing was starved.
    owed = ids.length < want ? 0 : owed - want;
    return moved;
  };
}
