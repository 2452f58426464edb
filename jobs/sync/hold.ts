import type { Queue } from 'bullmq';
import type { RedisClient } from '../redis.js';
import { QUEUE_NAME } from './queue.js';

// Every worker of the queue held back for a while (BullMQ's queue-wide rate limit), and why. The
// same limit also paces the queue at SYNC_RATE_LIMIT_PER_SEC, our own choice; `status` tells the
// three apart by this note, which lives exactly as long as the hold it explains.

/** What held the workers: the API's 429 (with its Retry-After), or Postgres being away. */
export type HoldCause = 'api_429' | 'database';

function holdCauseKey(prefix: string): string {
  return `${prefix}:${QUEUE_NAME}:cards-sync:hold-cause`;
}

/** Holds every worker of `queue` for `ms`, and notes why. */
export async function holdWorkers(
  queue: Queue,
  redis: RedisClient,
  ms: number,
  cause: HoldCause,
): Promise<void> {
  // The note first, so that no `status` sees the hold without it. It is for `status` alone: a
  // failure to write it never stops the hold.
  await redis.set(holdCauseKey(queue.opts.prefix ?? 'bull'), cause, 'PX', Math.max(1, ms)).catch(() => {});
  await queue.rateLimit(ms);
}

/** Why the workers are held now, if by us; `undefined` when the pace is only our own rate limit. */
export async function readHoldCause(redis: RedisClient, prefix: string): Promise<HoldCause | undefined> {
  const raw = await redis.get(holdCauseKey(prefix));
  return raw === 'api_429' || raw === 'database' ? raw : undefined;
}
