import { Worker } from 'bullmq';
import { rootCause } from '../../db/errors.js';
import { abandonRefreshRun } from '../../db/refresh/index.js';
import type { RedisConfig } from '../../src/config/index.js';
import { closeRedis, createRedis, settlesWithin } from '../redis.js';
import { startContinuousRefresh } from './continuous-runner.js';
import { createRefreshProcessor, type RefreshDeps, type RefreshOptions } from './nightly.js';
import { createRefreshQueue, REFRESH_QUEUE_NAME, type RefreshJobData } from './queue.js';

/**
 * Starts the refresh worker: one fan-out at a time per process. With `continuous`, also the
 * continuous refresh's lease loop (jobs/refresh/continuous-runner.ts), which carries its windows instead of a job.
 */
export async function startRefreshWorker(
  deps: RefreshDeps & {
    /** This process's fleet id, named by `status` as the continuous refresh lease's holder. */
    fleetId?: string;
  },
  options: RefreshOptions & { redisUrl: string | RedisConfig; prefix?: string },
): Promise<{ worker: Worker<RefreshJobData>; close(): Promise<void> }> {
  const connection = createRedis(options.redisUrl, { blocking: true });
  let stopping = false;
  const ownQueue = deps.refreshQueue ? undefined : createRefreshQueue(deps.redis, options.prefix ?? 'bull');
  const refreshQueue = deps.refreshQueue ?? ownQueue!;
  const processor = createRefreshProcessor({ ...deps, refreshQueue, stopping: () => stopping }, options);
  const worker = new Worker<RefreshJobData>(REFRESH_QUEUE_NAME, processor, {
    connection,
    prefix: options.prefix ?? 'bull',
    concurrency: 1,
    maxStalledCount: 5,
    lockDuration: options.lockDurationMs ?? 30_000,
    stalledInterval: Math.max(500, Math.round((options.lockDurationMs ?? 30_000) / 2)),
  });
  worker.on('error', (error) =>
    deps.logger.warn({ err: { message: error.message } }, 'refresh worker connection problem'),
  );
  worker.on('failed', (job, error) => {
    const reason = rootCause(error).message;
    deps.logger.warn({ jobId: job?.id, reason }, 'refresh job failed');
    const runId = job?.data?.refreshRunId;
    if (job && runId !== undefined && job.attemptsMade >= (job.opts.attempts ?? 1)) {
      abandonRefreshRun(deps.db, runId, `its refresh job failed for good: ${reason}`).catch(() => {});
    }
  });
  await worker.waitUntilReady();
  const continuous = options.continuous
    ? startContinuousRefresh(
        { ...deps, refreshQueue, stopping: () => stopping },
        { ...options, continuous: options.continuous },
      )
    : undefined;
  return {
    worker,
    async close() {
      stopping = true;
      // The lease first: another worker takes the continuous refresh over within a second.
      await continuous?.close();
      // The fan-out hands its job back between pages; a close stuck on QUIT to a dead Cluster node
      // is not waited for past that (the job's lock runs out and another worker carries on).
      await settlesWithin(worker.close(), 10_000);
      if (ownQueue) await settlesWithin(ownQueue.close(), 2000);
      await closeRedis(connection);
    },
  };
}
