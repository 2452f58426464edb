import type { Queue } from 'bullmq';
import type { RedisClient } from '../redis.js';
import { QUEUE_NAME } from './job.js';

// Why the queue is paused, kept in Redis beside BullMQ's own paused flag: what paused it, when and
// who; the reason as last said, with the reasons it replaced; and, for a rejected key, which process
// holds that key. `resume` clears it.

/** The process that held a key the API rejected: what a pause, `status` and the logs name. */
export interface RejectedKey {
  /** The key's fingerprint (src/api/client.ts `apiKeyFingerprint`), never the key. */
  fingerprint: string;
  /** The API's answer: 401 or 403. */
  httpStatus: number;
  /** `id` is its fleet id (fleet_processes.id), null for a process outside the fleet. */
  process: { id: string | null; host: string; pid: number; version: string };
}

/** A reason replaced by a later one: what it said, who said it, when. */
interface EarlierReason {
  reason: string;
  actor?: string;
  at: string;
}

export interface PauseReason {
  /** Why, as last said: a later `pause --reason` replaces it, the earlier ones go to `earlier`. */
  reason: string;
  /** What paused the queue. A later reason does not change it (nor the alert it raises). */
  by: 'operator' | 'auth_rejected' | 'breaker';
  /** When the queue was paused (ISO 8601). */
  at: string;
  /** Who paused it: the OS user or the token's name for an operator, the fleet id for a worker. */
  actor?: string;
  /** Who gave the current reason and when, once it is not the first. */
  reasonBy?: { actor: string; at: string };
  /** The reasons replaced, oldest first (the last {@link MAX_EARLIER} of them). */
  earlier?: EarlierReason[];
  /** With `by: 'auth_rejected'`: the process whose key the API rejected. */
  rejectedKey?: RejectedKey;
}

/** Earlier reasons a pause record keeps. */
const MAX_EARLIER = 10;

/** Where `pause` writes why the queue is paused; `resume` clears it. */
function pauseReasonKey(prefix: string): string {
  return `${prefix}:${QUEUE_NAME}:cards-sync:pause-reason`;
}

const keyOf = (queue: Queue) => pauseReasonKey(queue.opts.prefix ?? 'bull');

/**
 * Pauses the queue with a reason. With `keepFirst`, a reason already recorded stays (many workers
 * meeting the same rejected key at once: the first one names the pause). Returns whether this call
 * wrote the reason.
 */
export async function pauseQueue(
  queue: Queue,
  redis: RedisClient,
  reason: Omit<PauseReason, 'at'>,
  o: { keepFirst?: boolean } = {},
): Promise<boolean> {
  const value = JSON.stringify({ ...reason, at: new Date().toISOString() });
  let written = true;
  if (!o.keepFirst) await redis.set(keyOf(queue), value);
  else if ((await redis.set(keyOf(queue), value, 'NX')) !== 'OK') {
    // A record beside a running queue is stale (resumed from the jobs dashboard): replaced.
    written = !(await queue.isPaused());
    if (written) await redis.set(keyOf(queue), value);
  }
  await queue.pause();
  return written;
}

/**
 * A new reason for a queue already paused: it becomes the reason `status` shows, said by `actor`
 * now; the one it replaces is kept in `earlier`; what paused the queue, when, and a rejected key's
 * process stay as they were. Returns the record before and after.
 */
export async function restatePauseReason(
  queue: Queue,
  redis: RedisClient,
  reason: string,
  actor: string,
): Promise<{ before: PauseReason | undefined; after: PauseReason }> {
  const before = await readPauseReason(queue, redis);
  const at = new Date().toISOString();
  const after: PauseReason =
    before === undefined
      ? { reason, by: 'operator', at, actor }
      : {
          ...before,
          reason,
          reasonBy: { actor, at },
          earlier: [
            ...(before.earlier ?? []),
            {
              reason: before.reason,
              at: before.reasonBy?.at ?? before.at,
              ...((before.reasonBy?.actor ?? before.actor) !== undefined
                ? { actor: before.reasonBy?.actor ?? before.actor }
                : {}),
            },
          ].slice(-MAX_EARLIER),
        };
  await redis.set(keyOf(queue), JSON.stringify(after));
  return { before, after };
}

export async function resumeQueue(queue: Queue, redis: RedisClient): Promise<void> {
  await queue.resume();
  await redis.del(keyOf(queue));
}

export async function readPauseReason(queue: Queue, redis: RedisClient): Promise<PauseReason | undefined> {
  const raw = await redis.get(keyOf(queue));
  if (raw === null) return undefined;
  try {
    return JSON.parse(raw) as PauseReason;
  } catch {
    return undefined;
  }
}

/** `key 1a2b3c4d5e6f (HTTP 401) of worker vm-3:4242:9f0e1d on vm-3, pid 4242, 1.4.0`. */
export function describeRejectedKey(k: RejectedKey): string {
  const p = k.process;
  return (
    `key ${k.fingerprint} (HTTP ${k.httpStatus}) of ${p.id !== null ? `worker ${p.id}` : 'a worker outside the fleet'}` +
    ` on ${p.host}, pid ${p.pid}, ${p.version}`
  );
}
