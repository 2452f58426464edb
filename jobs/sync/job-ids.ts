import { createHmac, randomBytes } from 'node:crypto';
import type { Target } from '../../src/api/index.js';
import type { RedisClient } from '../redis.js';

// Job ids and deduplication ids name a subscriber, and both travel far: BullMQ's keys and
// dashboard, every worker's log lines, `sync_runs.job_id` (which the reporting role reads). An
// e-mail is therefore named by a keyed hash, never by itself: the key lives in Redis,
// where analysts do not reach, so an address cannot be recovered by hashing a list of guesses.
// The hash also keeps every address, whatever characters RFC 5321 lets it hold (`a:b@x`), out of
// BullMQ's rules for custom ids.

/** Where the key of the e-mail hash lives, beside the queue's own keys (and in its hash slot). */
function emailKeyKey(prefix: string): string {
  return `${prefix}:saved-cards-sync:cards-sync:email-id-key`;
}

const keys = new WeakMap<RedisClient, Map<string, Promise<Buffer>>>();

/**
 * The key every process sharing the queue hashes e-mails with: made once, at random, by whichever
 * process asks first (SET NX), then read. Kept by each connection once read.
 */
export function emailIdKey(redis: RedisClient, prefix: string): Promise<Buffer> {
  let byPrefix = keys.get(redis);
  if (!byPrefix) {
    byPrefix = new Map();
    keys.set(redis, byPrefix);
  }
  let key = byPrefix.get(prefix);
  if (!key) {
    key = (async () => {
      const where = emailKeyKey(prefix);
      await redis.set(where, randomBytes(32).toString('base64'), 'NX');
      const value = await redis.get(where);
      if (value === null) throw new Error(`the key of the e-mail hash vanished from Redis (${where})`);
      return Buffer.from(value, 'base64');
    })();
    const cache = byPrefix;
    cache.set(prefix, key);
    key.catch(() => cache.delete(prefix));
  }
  return key;
}

/** One key per subscriber id, one per e-mail ignoring case: the unit of deduplication. */
export function dedupKey(target: Target, emailKey: Buffer): string {
  if ('subscriberId' in target) return `id:${target.subscriberId}`;
  const hash = createHmac('sha256', emailKey).update(target.email.trim().toLowerCase(), 'utf8');
  return `email:${hash.digest('base64url').slice(0, 22)}`;
}
