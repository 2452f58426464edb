import { setTimeout as sleep } from 'node:timers/promises';
import { type Queue, Worker } from 'bullmq';
import { type Db, poolOf } from '../../db/client.js';
import { onEventsCommitted } from '../../db/events/index.js';
import { policyCache } from '../../db/refresh/index.js';
import type { ApiClient } from '../../src/api/index.js';
import type { RedisConfig } from '../../src/config/index.js';
import { policyParams } from '../../src/freshness/index.js';
import type { Logger } from '../../src/logging/index.js';
import type { Metrics } from '../../src/metrics/index.js';
import { createGroupCommitter } from '../../src/sync/index.js';
import type { CardTokens } from '../../src/tokens/index.js';
import { tracing } from '../../src/tracing/index.js';
import { closeRedis, createRedis, evictionPolicy, type RedisClient, settlesWithin } from '../redis.js';
import type { BulkBreakerOptions } from './bulk-breaker.js';
import { createSyncProcessor, type ProcessorDeps } from './processor.js';
import { QUEUE_NAME, type SyncJobData, type SyncJobResult } from './queue.js';

/** Options of {@link startSyncWorker}. */
export interface SyncWorkerOptions {
  /** `REDIS_URL`, or the whole topology (`Config.redis`). */
  redisUrl: string | RedisConfig;
  /** BullMQ key prefix. Default `bull`. */
  prefix?: string;
  /** Jobs in flight in this process (`SYNC_CONCURRENCY`). Default 16. */
  concurrency?: number;
  /** API requests per second across all workers (`SYNC_RATE_LIMIT_PER_SEC`); 0 = none. Default 0. */
  rateLimitPerSec?: number;
  /** The API deadline, ms: the job lock must outlive it. Default 10000. */
  apiTimeoutMs?: number;
  /** Times a job may stall (its worker died) before it fails. Default 2. */
  maxStalledCount?: number;
  /** `REFRESH_MAX_AGE`, ms: every success schedules its subscriber's next sync within it. Default 7 days. */
  maxAgeMs?: number;
}

export interface SyncWorker {
  worker: Worker<SyncJobData, SyncJobResult>;
  /** Stops taking jobs and waits for in-flight ones; true when they finished within `deadlineMs`. */
  close(deadlineMs?: number): Promise<boolean>;
}

/** Starts a BullMQ worker on the sync queue. */
export async function startSyncWorker(
  deps: {
    db: Db;
    api: ApiClient;
    logger: Logger;
    tokens: CardTokens;
    queue: Queue<SyncJobData, SyncJobResult>;
    redis: RedisClient;
    metrics?: Metrics;
    /** `SYNC_GONE_AFTER_NOT_FOUND`; 0 = never. Default 3. */
    goneAfterNotFound?: number;
    /** `CHANGE_EVENTS=on`: every change is also written as a change event. Default false. */
    changeEvents?: boolean;
    /** The mass-removal breaker over bulk work; `REFRESH_MAX_WIPE_RATIO` by default 0.2. */
    bulkBreaker?: BulkBreakerOptions;
  } & Pick<ProcessorDeps, 'fleetId' | 'liveProcessIds' | 'onOwnKeyRejected'>,
  options: SyncWorkerOptions,
): Promise<SyncWorker> {
  const policy = await evictionPolicy(deps.redis);
  if (policy !== undefined && policy !== 'noeviction') {
    deps.logger.warn(
      { maxmemoryPolicy: policy },
      `Redis maxmemory-policy is ${policy}: Redis may evict queued jobs under memory pressure. Set maxmemory-policy noeviction`,
    );
  }
  const connection = createRedis(options.redisUrl, { blocking: true });
  const apiTimeoutMs = options.apiTimeoutMs ?? 10_000;
  const rate = options.rateLimitPerSec ?? 0;
  // Answers of the jobs running here at once are committed together (one transaction a batch).
  // The refresh's shared plan, read now and every 30 s: each success schedules by it.
  const plan = policyCache(poolOf(deps.db), options.maxAgeMs ?? 7 * 86_400_000, {
    params: policyParams,
    detached: (fn) => tracing().detached(fn),
  });
  await plan.load();
  const writer = createGroupCommitter(deps.db, deps.tokens, {
    maxBatch: Math.max(1, options.concurrency ?? 16),
    policy: plan.get,
    changeEvents: deps.changeEvents ?? false,
    ...(deps.metrics ? { onBatch: (size: number) => deps.metrics?.writeBatchSize.observe(size) } : {}),
  });
  // cards_sync_change_events_total: the events this process's syncs committed (db/events/outbox.ts).
  const metrics = deps.metrics;
  const stopCountingEvents = metrics
    ? onEventsCommitted((counts) => {
        for (const [type, n] of Object.entries(counts)) metrics.changeEvents.inc({ type }, n);
      })
    : () => {};
  const ownKeyRejected = deps.onOwnKeyRejected;
  const processor = createSyncProcessor({
    ...deps,
    writer,
    // This worker stops fetching at once; the caller closes it and says why.
    ...(ownKeyRejected
      ? {
          onOwnKeyRejected: (message: string) => {
            worker.pause(true).catch(() => {});
            ownKeyRejected(message);
          },
        }
      : {}),
  });
  // Jobs running in this process: shutdown waits for these, not for Redis to say goodbye.
  let inFlight = 0;
  const telemetry = tracing().queueTelemetry();
  const worker = new Worker<SyncJobData, SyncJobResult>(
    QUEUE_NAME,
    async (job, token, signal) => {
      inFlight++;
      try {
        return await tracing().unlessSampled(() => processor(job, token, signal));
      } finally {
        inFlight--;
      }
    },
    {
      connection,
      prefix: options.prefix ?? 'bull',
      concurrency: options.concurrency ?? 16,
      // BullMQ applies a manual rate limit (429) only when a limiter is set, hence a huge one when unlimited.
      limiter: rate > 0 ? { max: rate, duration: 1000 } : { max: 1_000_000, duration: 1000 },
      // Locks are renewed while a job runs; the duration only bounds how soon a dead worker's job
      // is taken over. It outlives the API deadline so a slow answer never looks like a dead worker.
      lockDuration: apiTimeoutMs + 5000,
      stalledInterval: Math.max(1000, Math.round((apiTimeoutMs + 5000) / 2)),
      maxStalledCount: options.maxStalledCount ?? 2,
      autorun: true,
      // While tracing is on, each job's `process` span continues the trace its producer started.
      ...(telemetry ? { telemetry } : {}),
    },
  );
  worker.on('error', (error) =>
    deps.logger.warn({ err: { message: error.message } }, 'worker connection problem'),
  );
  worker.on('failed', (job, error) => {
    if (!job) return;
    const final = job.attemptsMade >= (job.opts.attempts ?? 1) || error.name === 'UnrecoverableError';
    deps.logger.info(
      { jobId: job.id, attemptsMade: job.attemptsMade, final },
      final ? 'job failed for good' : 'job will be retried',
    );
  });
  await worker.waitUntilReady();

  let closing: Promise<boolean> | undefined;
  const close = (deadlineMs = 30_000): Promise<boolean> => {
    closing ??= (async () => {
      const graceful = worker.close().then(() => true);
      // BullMQ's close ends with QUIT on its connections, which waits for good for a Cluster node
      // that died: once no job runs here any more, a few seconds of that is enough.
      const jobsDone = (async () => {
        for (;;) {
          while (inFlight > 0) await sleep(50, undefined, { ref: false });
          // A job fetched just as the close began may still start: look again after the wait.
          if ((await settlesWithin(graceful, 3000)) || inFlight === 0) return true;
        }
      })();
      const finished = await Promise.race([graceful, jobsDone, sleep(deadlineMs, false, { ref: false })]);
      if (!finished) {
        // Past the deadline: abort in-flight requests so their jobs end (and retry elsewhere), and
        // give them a last moment; a job stuck past that is left to the stalled-job check.
        worker.cancelAllJobs('shutdown deadline passed');
        await settlesWithin(graceful, 5000);
      }
      await settlesWithin(processor.flush(), 1000);
      stopCountingEvents();
      await closeRedis(connection);
      return finished;
    })();
    return closing;
  };
  return { worker, close };
}

/** True when the queue has nothing waiting, delayed, prioritised or active. */
export async function queueIsIdle(queue: Queue): Promise<boolean> {
  const c = await queue.getJobCounts('waiting', 'delayed', 'active', 'prioritized', 'waiting-children');
  return Object.values(c).every((n) => n === 0);
}
