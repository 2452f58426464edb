import type { Queue } from 'bullmq';
import type { RedisClient } from '../redis.js';
import { heldCount, LANE_PRIORITY, type SyncJobData, type SyncJobResult } from '../sync/index.js';

// What a refresh run still has in the sync queue: its backlog (for backpressure) and whether any
// of its jobs is still outstanding (for its close).

const outstandingStates = ['waiting', 'active', 'delayed', 'prioritized'] as const;

/** Whether any sync job of this run is still waiting, delayed or running. */
export async function hasOutstandingJobs(
  queue: Queue<SyncJobData, SyncJobResult>,
  runId: number,
): Promise<boolean> {
  const counts = await queue.getJobCounts(...outstandingStates);
  if (Object.values(counts).every((n) => n === 0)) return false;
  // The backpressure window keeps this scan short.
  for (let start = 0; ; start += 1000) {
    const jobs = await queue.getJobs([...outstandingStates], start, start + 999);
    if (jobs.some((j) => j?.data?.refreshRunId === runId)) return true;
    if (jobs.length < 1000) return false;
  }
}

/**
 * The refresh's own backlog: its lane, and retries waiting out their backoff. Ops work waiting
 * does not count: it must not stop the fan-out, or the refresh would have nothing left to claim
 * its share with.
 */
export async function refreshBacklog(
  queue: Queue<SyncJobData, SyncJobResult>,
  redis: RedisClient,
): Promise<number> {
  const counts = await queue.getCountsPerPriority([LANE_PRIORITY.refresh]);
  // Bulk jobs the paused bulk lane holds wait in the delayed set too: they are no refresh backlog,
  // and 50,000 of them would stop the fan-out for as long as the bulk lane stays paused.
  const [delayed, held] = await Promise.all([
    queue.getDelayedCount(),
    heldCount(redis, queue.opts.prefix ?? 'bull'),
  ]);
  return (counts[LANE_PRIORITY.refresh] ?? 0) + Math.max(0, delayed - held);
}
