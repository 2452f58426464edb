import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import type { RedisConfig } from '../src/config/index.js';

/** A connection to any of the three topologies: BullMQ and our own commands take either. */
export type RedisClient = Redis | Cluster;

/**
 * The one connection factory of every Redis user (worker, enqueue, status, refresh, pause and
 * resume, the admin server, Bull Board, metrics, demo and bench). A single node from `REDIS_URL`;
 * a master found through Sentinel; or a Cluster. `rediss:` means TLS to the data nodes (and to the
 * Sentinels), verified against `REDIS_TLS_CA_FILE` when given, else the system's CAs.
 *
 * Workers need `maxRetriesPerRequest: null` (blocking commands must wait out a restart or a
 * failover); short-lived commands (enqueue, status) fail fast instead. A plain URL string is a
 * single node (tests and benchmarks).
 */
export function createRedis(target: string | RedisConfig, options: { blocking?: boolean } = {}): RedisClient {
  const config: RedisConfig = typeof target === 'string' ? { url: target, topology: 'single' } : target;
  const url = new URL(config.url);
  const tls = url.protocol === 'rediss:' ? { ...(config.tlsCa ? { ca: config.tlsCa } : {}) } : undefined;
  const auth: RedisOptions = {
    ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
    ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
    ...(tls ? { tls } : {}),
  };
  const behaviour: RedisOptions = options.blocking
    ? { maxRetriesPerRequest: null, enableReadyCheck: true }
    : { maxRetriesPerRequest: 2, connectTimeout: 5000 };
  const giveUp = (n: number) => (options.blocking ? Math.min(n * 50, 2000) : n > 3 ? null : n * 200);
  let redis: RedisClient;
  if (config.topology === 'cluster') {
    const clusterOptions: ClusterOptions = {
      redisOptions: { ...auth, ...behaviour },
      // Every command to the master of its slot: a queue must read what it just wrote.
      scaleReads: 'master',
      enableReadyCheck: true,
      clusterRetryStrategy: giveUp,
      ...(options.blocking ? {} : { maxRedirections: 16 }),
      // With TLS the certificates name the hosts given, not the addresses the cluster announces.
      ...(tls ? { dnsLookup: (address, callback) => callback(null, address) } : {}),
    };
    redis = new Cluster(config.clusterNodes!, clusterOptions);
  } else if (config.topology === 'sentinel') {
    redis = new Redis({
      ...auth,
      ...behaviour,
      sentinels: config.sentinels!,
      name: config.sentinelName!,
      ...(config.sentinelPassword ? { sentinelPassword: config.sentinelPassword } : {}),
      ...(tls ? { enableTLSForSentinelMode: true, sentinelTLS: tls } : {}),
      // After a failover, a master that became a replica answers READONLY: find the new one.
      reconnectOnError: (error) => error.message.startsWith('READONLY'),
      sentinelRetryStrategy: (n) => Math.min(n * 200, 2000),
      retryStrategy: giveUp,
    });
  } else {
    // ioredis reads host, port, db, user and password from the URL itself.
    redis = new Redis(config.url, { ...behaviour, ...(tls ? { tls } : {}), retryStrategy: giveUp });
  }
  // Connection errors surface through the commands that fail; an unhandled 'error' event would
  // crash. The last one is kept so that a failure can name its cause (ECONNREFUSED, not jargon).
  redis.on('error', (error: NodeJS.ErrnoException) => {
    lastErrors.set(redis, error.code ?? error.message);
  });
  return redis;
}

const lastErrors = new WeakMap<RedisClient, string>();

/** The last connection error of a connection made by {@link createRedis}, e.g. `ECONNREFUSED`. */
export function lastRedisError(redis: RedisClient): string | undefined {
  return lastErrors.get(redis);
}

/** The eviction policy, or `undefined` where CONFIG is not allowed (managed Redis). */
export async function evictionPolicy(redis: RedisClient): Promise<string | undefined> {
  try {
    const reply = (await redis.config('GET', 'maxmemory-policy')) as string[];
    return reply[1];
  } catch {
    return undefined;
  }
}

/**
 * Closes a connection politely (QUIT) but never waits long for it: on a Cluster one of whose nodes
 * died, QUIT to that node waits in the offline queue for good. Past `ms` the connection is dropped.
 */
export async function closeRedis(redis: RedisClient, ms = 2000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    redis.quit().catch(() => {}),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms);
      timer.unref();
    }),
  ]);
  clearTimeout(timer);
  redis.disconnect();
}

/** Whether `promise` settled within `ms` (its outcome is not waited for past that). */
export async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const settled = await Promise.race([
    promise.then(
      () => true,
      () => true,
    ),
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), ms);
      timer.unref();
    }),
  ]);
  clearTimeout(timer);
  return settled;
}
