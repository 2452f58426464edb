import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'bullmq';
import pg from 'pg';
import { createDb } from '../db/client.js';
import { runMigrations } from '../db/migrate.js';
import { loadRefreshRun, startRefreshRun } from '../db/refresh/runs.js';
import { createRedis } from '../jobs/redis.js';
import { createRefreshQueue, startRefreshWorker } from '../jobs/refresh/index.js';
import { createSyncQueue, QUEUE_NAME } from '../jobs/sync/queue.js';
import { createLogger } from '../src/logging/index.js';
import { benchRedis, databaseFlag, parseFlags, REDIS_FLAG } from './harness.js';

// How much Redis a refresh of N subscribers needs: the fan-out's backpressure should keep it flat.
// Syncs are stood in for by a worker that completes each job at once, so the fan-out, not the
// API, sets the pace.   npm run bench:refresh -- --subscribers 1000000

const { values } = parseFlags({
  options: {
    subscribers: { type: 'string', default: '1000000' },
    ...databaseFlag('cards_sync_bench_refresh'),
    ...REDIS_FLAG,
  },
});
const n = Number(values.subscribers);
const databaseUrl = values['database-url']!;
const bench = benchRedis(values['redis-url']);
const redisUrl = bench.target;

async function usedMemory(redis: ReturnType<typeof createRedis>): Promise<number> {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)?.[1] ?? 0);
}

async function main() {
  const admin = new pg.Client({ connectionString: databaseUrl.replace(/\/[^/]+$/, '/postgres') });
  await admin.connect();
  const dbName = new URL(databaseUrl).pathname.slice(1);
  await admin.query(`drop database if exists "${dbName}" with (force)`);
  await admin.end();
  await runMigrations(databaseUrl);
  const handle = createDb(databaseUrl, { max: 4, timeoutMs: 0 });
  const seeded = Date.now();
  await handle.pool.query(
    `insert into subscribers (subscriber_id, last_success_at) select g, now() - interval '2 days' from generate_series(1, $1::int) g`,
    [n],
  );
  console.log(`seeded ${n} subscribers in ${((Date.now() - seeded) / 1000).toFixed(1)} s`);

  const prefix = bench.tag(`bench${Date.now().toString(36)}`);
  const redis = createRedis(redisUrl, { blocking: true });
  const syncQueue = createSyncQueue(redis, { prefix });
  const refreshQueue = createRefreshQueue(redis, prefix);
  const baseline = await usedMemory(redis);
  const logger = createLogger({ level: 'warn' });
  const drain = new Worker(QUEUE_NAME, async () => ({ status: 'succeeded' }), {
    connection: createRedis(redisUrl, { blocking: true }),
    prefix,
    concurrency: 200,
  });
  const refresh = await startRefreshWorker(
    { db: handle.db, logger, syncQueue, redis },
    { redisUrl, prefix, pollMs: 200 },
  );
  const started = await startRefreshRun(handle.db, { trigger: 'manual' });
  if (!started.started) throw new Error('a run is in progress');
  const t0 = Date.now();
  await refreshQueue.add('refresh', { trigger: 'manual', refreshRunId: started.run.id });

  let peak = baseline;
  let peakWaiting = 0;
  let lastReport = Date.now();
  for (;;) {
    peak = Math.max(peak, await usedMemory(redis));
    const c = await syncQueue.getJobCounts('waiting', 'prioritized', 'delayed');
    peakWaiting = Math.max(peakWaiting, (c.waiting ?? 0) + (c.prioritized ?? 0) + (c.delayed ?? 0));
    const run = await loadRefreshRun(handle.db, started.run.id);
    if (Date.now() - lastReport > 10_000) {
      lastReport = Date.now();
      console.log(
        `  ${run?.subscribersTotal ?? 0} fanned out, Redis used_memory ${(peak / 1048576).toFixed(1)} MiB peak`,
      );
    }
    if (run?.status === 'completed') break;
    await sleep(100);
  }
  const seconds = (Date.now() - t0) / 1000;
  const run = await loadRefreshRun(handle.db, started.run.id);
  const result = {
    subscribers: n,
    fannedOut: run?.subscribersTotal,
    seconds: Math.round(seconds * 10) / 10,
    perSecond: Math.round(n / seconds),
    redisBaselineMiB: Math.round((baseline / 1048576) * 10) / 10,
    redisPeakUsedMemoryMiB: Math.round((peak / 1048576) * 10) / 10,
    redisPeakAboveBaselineMiB: Math.round(((peak - baseline) / 1048576) * 10) / 10,
    peakWaitingJobs: peakWaiting,
  };
  console.log(JSON.stringify(result));
  await refresh.close();
  await drain.close();
  for (const q of [syncQueue, refreshQueue]) await q.obliterate({ force: true }).catch(() => {});
  await handle.close();
  // Lingering BullMQ connections must not keep a finished benchmark alive.
  process.exit(0);
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
