import { setTimeout as sleep } from 'node:timers/promises';
import type { Queue } from 'bullmq';
import type { RedisClient } from '../../jobs/redis.js';
import { refreshIsIdle } from '../../jobs/refresh/index.js';
import { queueIsIdle, readPauseReason } from '../../jobs/sync/index.js';
import type { Io } from './common.js';

// `worker --exit-when-idle`: when a worker that runs until its queues are empty may stop.

/** What ended the wait: the queues idle, the queue paused with work left, or the worker stopping. */
export type IdleEnd = 'idle' | 'paused' | 'stopped';

/**
 * Polls every 250 ms until the sync and refresh queues have no waiting, delayed or active jobs
 * ('idle', said on stdout), or the sync queue is paused with nothing active ('paused', said on
 * stderr with the pause's reason: waiting for idle would wait forever), or `stopping()` is true.
 */
export async function untilIdle(
  queues: { sync: Queue; refresh: Queue; redis: RedisClient },
  io: Io,
  stopping: () => boolean,
): Promise<IdleEnd> {
  const { sync: queue, refresh: refreshQueue, redis } = queues;
  // Idle must be seen twice in a row: a job moving between lists is briefly in none.
  let idleSeen = 0;
  let pausedSeen = 0;
  while (!stopping()) {
    await sleep(250);
    const idle =
      (await queueIsIdle(queue).catch(() => false)) && (await refreshIsIdle(refreshQueue).catch(() => false));
    idleSeen = idle ? idleSeen + 1 : 0;
    if (idleSeen >= 2) {
      io.out('queue is idle: nothing waiting, delayed or active');
      return 'idle';
    }
    // Paused with work left: waiting for idle would wait forever, so say why and stop.
    const paused = !idle && (await queue.isPaused().catch(() => false));
    const active = paused ? (await queue.getJobCounts('active').catch(() => ({ active: 1 }))).active : 1;
    pausedSeen = paused && active === 0 ? pausedSeen + 1 : 0;
    if (pausedSeen >= 4) {
      const reason = await readPauseReason(queue, redis).catch(() => undefined);
      io.err(
        `cards-sync: the queue is paused${reason ? ` (${reason.by}: ${reason.reason})` : ''}; ` +
          'jobs are left waiting until `cards-sync resume`',
      );
      return 'paused';
    }
  }
  return 'stopped';
}
