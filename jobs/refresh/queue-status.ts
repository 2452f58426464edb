import type { RedisClient } from '../redis.js';
import {
  type createSyncQueue,
  type HoldCause,
  heldCount,
  type KeyRejection,
  type Lane,
  type LaneWait,
  type PauseReason,
  readBulkPause,
  readHoldCause,
  readKeyVerdicts,
  readLaneHeads,
  readPauseReason,
  standingRejections,
} from '../sync/index.js';
import { CONTINUOUS_SCHEDULER_ID, createRefreshQueue, SCHEDULER_ID } from './queue.js';

// What the sync queue is doing, read from Redis: counts, pause and its reason, a hold and whose it
// is, the bulk lane, the nightly scheduler. `status` prints it; the overview shows it. It is read
// here, above jobs/sync/, because it names the refresh's schedulers too.

export interface QueueStatus {
  prefix: string;
  counts: Record<string, number>;
  paused: boolean;
  pausedBecause?: string;
  pausedBy?: string;
  pausedAt?: string;
  /**
   * The whole pause record: who paused, who gave the current reason and when, the reasons it
   * replaced, and for a rejected key the process that holds it. Null when not paused.
   */
  pause: PauseReason | null;
  /**
   * Processes whose API key was rejected in the last 24 h, and the key has not worked since (newest
   * first): each stopped itself while another key worked (`scope: 'process'`), or paused the queue.
   */
  rejectedKeys: KeyRejection[];
  /**
   * Seconds the oldest waiting job has waited, in any lane, or null when none waits: the oldest of
   * the jobs at the heads of the lanes, each counted from when it was queued (jobs/sync/lane-heads.ts).
   */
  oldestWaitingSeconds: number | null;
  /** The lane that job waits in; null when none waits. */
  oldestWaitingLane: Lane | null;
  /** Each lane (ops, bulk, refresh): its waiting jobs and how long the one at its head has waited. */
  lanes: Record<Lane, LaneWait>;
  /** Milliseconds left of the queue-wide hold, 0 when none. */
  rateLimitedForMs: number;
  /**
   * What holds the queue: the API's 429 (`api_429`), Postgres away (`database`), or our own
   * `SYNC_RATE_LIMIT_PER_SEC` pacing it (`own_limit`); null when nothing does.
   */
  rateLimitedBy: HoldCause | 'own_limit' | null;
  /** When the nightly scheduler fires next (ISO), or null when no worker registered it yet. */
  nextNightlyRefresh: string | null;
  nightlyPattern: string | null;
  /**
   * The refresh the workers registered: `nightly` (the cron sweep), `continuous` (REFRESH_MODE=
   * continuous: a window every minute when none runs), or null when no worker has registered one.
   */
  refreshMode: 'nightly' | 'continuous' | null;
  /** The bulk lane: paused by the mass-removal breaker (jobs/sync/bulk-breaker.ts), why, and the jobs it holds. */
  bulkLane: { paused: boolean; reason?: string; at?: string; held: number };
}

/** Above any limiter's count of jobs in a second: only a hold reaches it. */
const HOLD_COUNT = 1_000_000_000;

/** The queue's state, from connections the caller owns (`status`, and the admin server's overview). */
export async function queueStatusOf(
  queue: ReturnType<typeof createSyncQueue>,
  redis: RedisClient,
  prefix: string,
  /** `SYNC_RATE_LIMIT_PER_SEC` as this process has it (0: none). */
  ownRateLimitPerSec = 0,
): Promise<QueueStatus> {
  const counts = await queue.getJobCounts(
    'waiting',
    'active',
    'delayed',
    'prioritized',
    'waiting-children',
    'completed',
    'failed',
  );
  const paused = await queue.isPaused();
  const reason = paused ? await readPauseReason(queue, redis) : undefined;
  const heads = await readLaneHeads(queue, redis);
  // A hold (queue.rateLimit) fills the limiter's counter to the brim, so it is told apart from
  // the limiter's own count of jobs in its window; that count holds the queue only once it
  // reaches SYNC_RATE_LIMIT_PER_SEC, not after any job (BullMQ's default of 1 would say so).
  const holdTtl = await queue.getRateLimitTtl(HOLD_COUNT);
  const ownTtl = holdTtl > 0 || ownRateLimitPerSec <= 0 ? 0 : await queue.getRateLimitTtl(ownRateLimitPerSec);
  const ttl = Math.max(holdTtl, ownTtl);
  const cause =
    holdTtl > 0 ? ((await readHoldCause(redis, prefix)) ?? 'api_429') : ownTtl > 0 ? 'own_limit' : null;
  const [bulkPause, held, verdicts] = await Promise.all([
    readBulkPause(redis, prefix),
    heldCount(redis, prefix),
    readKeyVerdicts(redis, prefix),
  ]);
  const refreshQueue = createRefreshQueue(redis, prefix);
  const [scheduler, continuous] = await Promise.all([
    refreshQueue.getJobScheduler(SCHEDULER_ID),
    refreshQueue.getJobScheduler(CONTINUOUS_SCHEDULER_ID),
  ]).finally(() => refreshQueue.close());
  return {
    nextNightlyRefresh: scheduler?.next ? new Date(scheduler.next).toISOString() : null,
    nightlyPattern: scheduler?.pattern
      ? `${scheduler.pattern}${scheduler.tz ? ` (${scheduler.tz})` : ''}`
      : null,
    refreshMode: continuous ? 'continuous' : scheduler ? 'nightly' : null,
    prefix,
    counts,
    paused,
    ...(reason ? { pausedBecause: reason.reason, pausedBy: reason.by, pausedAt: reason.at } : {}),
    pause: reason ?? null,
    rejectedKeys: standingRejections(verdicts),
    oldestWaitingSeconds: heads.oldestWaitingSeconds,
    oldestWaitingLane: heads.oldestLane,
    lanes: heads.lanes,
    rateLimitedForMs: Math.max(0, ttl),
    rateLimitedBy: cause,
    bulkLane: bulkPause
      ? { paused: true, reason: bulkPause.reason, at: bulkPause.at, held }
      : { paused: false, held },
  };
}
