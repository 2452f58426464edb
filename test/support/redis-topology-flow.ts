import { randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { expect } from 'vitest';
import type { DbHandle } from '../../db/client.js';
import { loadRefreshRun, startRefreshRun } from '../../db/refresh/index.js';
import { createRedis } from '../../jobs/redis.js';
import {
  createRefreshQueue,
  pauseProcessing,
  registerNightlyScheduler,
  resumeProcessing,
  startRefreshWorker,
} from '../../jobs/refresh/index.js';
import { createSyncQueue, enqueueSyncs, LANE_PRIORITY, startSyncWorker } from '../../jobs/sync/index.js';
import { createAdminApp } from '../../src/admin/app.js';
import { createApiClient } from '../../src/api/index.js';
import type { RedisConfig } from '../../src/config/index.js';
import type { Logger } from '../../src/logging/index.js';
import { createMetrics } from '../../src/metrics/index.js';
import { ADMIN_TOKEN, API_KEY, testTokens, type useScriptedApi } from './fixtures.js';
import { runCli, waitFor } from './queue-helpers.js';

/**
 * The whole path on one Redis topology, as a user runs it: enqueue → worker → rows, pause and
 * resume (the CLI's `status` shows it), a 429 that holds every worker without using an attempt,
 * the nightly scheduler, a refresh whose tally closes with the right counts while an ops request
 * promotes one of its jobs, and Bull Board. Every Lua script, multi-key command and
 * pipeline of ours and BullMQ's runs against the topology given.
 */
export async function exerciseTopology(options: {
  redis: RedisConfig;
  /** The variables that name the topology to a CLI process. */
  env: Record<string, string>;
  database: { url: string; handle: DbHandle };
  upstream: ReturnType<typeof useScriptedApi>;
  logger: Logger;
  /** Subscriber ids of this run start here, so that runs on one database do not meet. */
  base: number;
}): Promise<void> {
  const { database, upstream, logger, base } = options;
  const db = database.handle.db;
  // A hash tag, so that on a Cluster every key of the queue lives in one slot.
  const prefix = `{t${randomBytes(4).toString('hex')}}`;
  const redis = createRedis(options.redis, { blocking: true });
  const queue = createSyncQueue(redis, { prefix, attempts: 3, backoffDelayMs: 50 });
  const refreshQueue = createRefreshQueue(redis, prefix);
  const api = createApiClient({
    baseUrl: upstream.url,
    apiKey: API_KEY,
    pathStyle: 'standard',
    timeoutMs: 2000,
  });
  const env = { ...options.env, QUEUE_PREFIX: prefix, DATABASE_URL: database.url };
  const closers: (() => Promise<unknown>)[] = [];
  try {
    const sync = await startSyncWorker(
      { db, api, logger, tokens: testTokens, queue, redis },
      { redisUrl: options.redis, prefix, concurrency: 8 },
    );
    closers.push(() => sync.close(5000));
    const refresh = await startRefreshWorker(
      { db, logger, syncQueue: queue, redis, refreshQueue },
      { redisUrl: options.redis, prefix, pollMs: 100 },
    );
    closers.push(() => refresh.close());

    const ids = Array.from({ length: 30 }, (_, i) => base + i);
    const runsOf = async (where: ReturnType<typeof sql>) =>
      (await db.execute<{ n: number }>(sql`select count(*)::int as n from sync_runs where ${where}`)).rows[0]!
        .n;
    const inRange = sql`subscriber_id between ${base} and ${base + 999}`;

    // 1. enqueue → worker → rows.
    const counts = await enqueueSyncs(
      queue,
      ids.map((subscriberId) => ({ subscriberId })),
      'manual',
    );
    expect(counts).toMatchObject({ enqueued: 30, alreadyQueued: 0 });
    await waitFor(
      '30 synced subscribers',
      async () => (await runsOf(sql`${inRange} and status = 'succeeded'`)) === 30,
      30_000,
    );

    // 2. pause: nothing runs, status shows it (CLI); resume: it runs.
    expect(await pauseProcessing({ syncQueue: queue, redis }, 'topology test')).toEqual({ paused: true });
    await enqueueSyncs(queue, [{ subscriberId: base + 500 }], 'api');
    const status = await runCli(['status', '--json'], env);
    expect(status.code, status.stderr).toBe(0);
    const json = JSON.parse(status.stdout) as {
      queue: { paused: boolean; pausedBecause: string; counts: Record<string, number> };
    };
    expect(json.queue).toMatchObject({ paused: true, pausedBecause: 'topology test' });
    expect(json.queue.counts.waiting).toBe(1);
    await new Promise((r) => setTimeout(r, 500));
    expect(await runsOf(sql`subscriber_id = ${base + 500}`)).toBe(0);
    await resumeProcessing({ db, syncQueue: queue, refreshQueue, redis });
    await waitFor(
      'the paused job to run after resume',
      async () => (await runsOf(sql`subscriber_id = ${base + 500}`)) === 1,
    );

    // 3. a 429 holds every worker for Retry-After, uses no attempt, and the sync then succeeds.
    upstream.script.set(`id:${base + 600}`, (n) =>
      n === 1 ? { status: 429, headers: { 'retry-after': '1' } } : { status: 200, body: [] },
    );
    const t429 = Date.now();
    await enqueueSyncs(queue, [{ subscriberId: base + 600 }], 'manual');
    await waitFor(
      'the rate-limited sync to succeed',
      async () => (await runsOf(sql`subscriber_id = ${base + 600} and status = 'succeeded'`)) === 1,
    );
    expect(Date.now() - t429).toBeGreaterThanOrEqual(900);
    expect(await runsOf(sql`subscriber_id = ${base + 600} and status = 'rate_limited'`)).toBe(1);
    const job = (await queue.getJobs(['completed'], 0, 100)).find(
      (j) => 'subscriberId' in j.data.target && j.data.target.subscriberId === base + 600,
    );
    expect(job?.attemptsMade).toBe(1);

    // 4. the nightly scheduler registers, and status reads it back.
    await registerNightlyScheduler(refreshQueue, '0 2 * * *', 'UTC');
    const scheduled = JSON.parse((await runCli(['status', '--json'], env)).stdout) as {
      queue: { nextNightlyRefresh: string | null };
    };
    expect(scheduled.queue.nextNightlyRefresh).toMatch(/T02:00:00/);

    // 5. a refresh of the known subscribers of this run, with its tally; an ops request for one of
    // them while it waits in the refresh's lane promotes it, and it still syncs once.
    await db.execute(sql`delete from subscribers where not (${inRange})`);
    const known = (await db.execute<{ n: number }>(sql`select count(*)::int as n from subscribers`)).rows[0]!
      .n;
    await queue.pause();
    const started = await startRefreshRun(db, { trigger: 'nightly' });
    if (!started.started) throw new Error('a refresh is in progress');
    await refreshQueue.add('refresh', { trigger: 'nightly', refreshRunId: started.run.id });
    await waitFor('the fan-out', async () => {
      const lanes = await queue.getCountsPerPriority([LANE_PRIORITY.refresh]);
      return lanes[LANE_PRIORITY.refresh] === known;
    });
    expect(await enqueueSyncs(queue, [{ subscriberId: base }], 'manual')).toMatchObject({ promoted: 1 });
    await queue.resume();
    const run = await waitFor(
      'the refresh to complete',
      async () => {
        const r = await loadRefreshRun(db, started.run.id);
        return r?.status === 'completed' ? r : false;
      },
      60_000,
    );
    expect(run).toMatchObject({ subscribersTotal: known, succeeded: known, failed: 0 });
    const promoted = await db.execute<{ trigger: string }>(
      sql`select trigger from sync_runs where subscriber_id = ${base} and refresh_run_id = ${started.run.id}`,
    );
    expect(promoted.rows).toEqual([{ trigger: 'manual' }]);

    // 6. Bull Board lists both queues and their counts through the admin server.
    const admin = createAdminApp({
      db,
      redis,
      syncQueue: queue,
      refreshQueue,
      metrics: createMetrics({ defaultMetrics: false }),
      logger,
      adminToken: ADMIN_TOKEN,
      prefix,
    });
    const board = await admin.app.fetch(
      new Request('http://x/admin/queues/api/queues?page=1', {
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      }),
    );
    expect(board.status).toBe(200);
    const names = ((await board.json()) as { queues: { name: string }[] }).queues.map((q) => q.name);
    expect(names).toEqual(expect.arrayContaining(['saved-cards-sync', 'saved-cards-refresh']));
  } finally {
    for (const close of closers.reverse()) await close().catch(() => {});
    for (const q of [queue, refreshQueue]) {
      await q.obliterate({ force: true }).catch(() => {});
      await q.close().catch(() => {});
    }
    await api.close();
    redis.disconnect();
  }
}
