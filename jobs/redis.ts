import { Redis, type RedisOptions } from 'ioredis';

/**
 * An ioredis connection for BullMQ. Workers need `maxRetriesPerRequest: null` (blocking commands
 * must wait out a Redis restart); short-lived commands (enqueue, status) fail fast instead.
 */
export function createRedis(url: string, options: { blocking?: boolean } = {}): Redis {
  const base: RedisOptions = options.blocking
    ? { maxRetriesPerRequest: null, enableReadyCheck: true }
    : { maxRetriesPerRequest: 2, connectTimeout: 5000, retryStrategy: (n) => (n > 3 ? null : n * 200) };
  const redis = new Redis(url, base);
  // Connection errors surface through the commands that fail; an unhandled 'error' event would
  // crash. The last one is kept so that a failure can name its cause (ECONNREFUSED, not jargon).
  redis.on('error', (error: NodeJS.ErrnoException) => {
    lastErrors.set(redis, error.code ?? error.message);
  });
  return redis;
}

const lastErrors = new WeakMap<Redis, string>();

/** The last connection error of a connection made by {@link createRedis}, e.g. `ECONNREFUSED`. */
export function lastRedisError(redis: Redis): string | undefined {
  return lastErrors.get(redis);
}

/** The eviction policy, or `undefined` where CONFIG is not allowed (managed Redis). */
export async function evictionPolicy(redis: Redis): Promise<string | undefined> {
  try {
    const reply = (await redis.config('GET', 'maxmemory-policy')) as string[];
    return reply[1];
  } catch {
    return undefined;
  }
}
