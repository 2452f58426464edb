import { sql } from 'drizzle-orm';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { startRefreshRun } from '../../db/refresh/index.js';
import { subscribers } from '../../db/schema/index.js';
import { createRefreshQueue, startRefreshWorker } from '../../jobs/refresh/index.js';
import { enqueueSyncs, startSyncWorker } from '../../jobs/sync/index.js';
import { LANE_PRIORITY, opsServedCounter, opsServedKey } from '../../jobs/sync/lanes.js';
import { createApiClient } from '../../src/api/index.js';
import { API_KEY, testTokens, useScriptedApi } from '../support/fixtures.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';
import { runCli, testQueue, waitFor } from '../support/queue-helpers.js';

// The ops lane: work a person asked for is served before a refresh's backlog, a subscriber already
// waiting in the refresh is promoted rather than left behind it, and a flood of ops work still
// leaves the refresh its share. Real Redis, Postgres, workers and the mock API.

const database = useTestDatabase();
const upstream = useScriptedApi();
const { logger } = captureLogger('info');
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await database.handle.db.execute(
    sql`truncate refresh_runs, sync_runs, subscribers, saved_cards, saved_card_change_log`,
  );
});

const db = () => database.handle.db;
const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

function setup() {
  const q = testQueue({ attempts: 2 });
  cleanups.push(q.cleanup);
  const api = createApiClient({
    baseUrl: upstream.url,
    apiKey: API_KEY,
    pathStyle: 'standard',
    timeoutMs: 2000,
  });
  cleanups.push(() => api.close());
  const startSync = async (concurrency: number) => {
    const w = await startSyncWorker(
      { db: db(), api, logger, tokens: testTokens, queue: q.queue, redis: q.redis },
      { redisUrl: inject('redisUrl'), prefix: q.prefix, concurrency },
    );
    cleanups.push(() => w.close(5000));
    return w;
  };
  return { ...q, startSync };
}

/** Subscriber ids of `sync_runs` in the order they were written, with trigger and refresh run. */
async function runsInOrder() {
  const r = await db().execute<{ subscriber_id: number; trigger: string; refresh_run_id: number | null }>(
    sql`select subscriber_id::int, trigger, refresh_run_id::int from sync_runs order by id`,
  );
  return r.rows;
}

describe('the ops lane', () => {
  it('an ops re-sync is served before a refresh backlog; one already waiting in the refresh is promoted and synced once', async () => {
    const s = setup();
    const started = await startRefreshRun(db(), { trigger: 'nightly' });
    if (!started.started) throw new Error('no run');
    const runId = started.run.id;
    await enqueueSyncs(
      s.queue,
      range(1, 300).map((subscriberId) => ({ subscriberId })),
      'nightly',
      { refreshRunId: runId },
    );
    const counts = await enqueueSyncs(s.queue, [{ subscriberId: 250 }, { subscriberId: 5000 }], 'manual');
    expect(counts).toMatchObject({ enqueued: 1, alreadyQueued: 1, promoted: 1 });
    expect(counts.jobIds[0]).toBe(`id:250:r${runId}`);
    const promoted = await s.queue.getJob(`id:250:r${runId}`);
    expect(await promoted!.getState()).toBe('waiting');
    expect(promoted!.data).toEqual({
      v: 1,
      target: { subscriberId: 250 },
      trigger: 'manual',
      refreshRunId: runId,
      promoted: true,
    });
    // From the CLI, in words: one more waiting in the refresh moves ahead of it.
    const cli = await runCli(['enqueue', '--id', '251'], {
      DATABASE_URL: database.url,
      REDIS_URL: inject('redisUrl'),
      QUEUE_PREFIX: s.prefix,
    });
    expect(cli.stdout, cli.stderr).toContain(
      'enqueued 0, already queued 1, rejected 0 (1 of them was waiting in a refresh and moved ahead of it)',
    );
    // Asking again changes nothing: it is already in the ops lane.
    expect(await enqueueSyncs(s.queue, [{ subscriberId: 250 }], 'api')).toMatchObject({
      enqueued: 0,
      promoted: 0,
    });

    await s.startSync(1);
    await waitFor('every job to finish', async () => (await runsInOrder()).length === 301, 30_000);
    const runs = await runsInOrder();
    expect(new Set(runs.slice(0, 3).map((r) => r.subscriber_id))).toEqual(new Set([250, 251, 5000]));
    const of250 = runs.filter((r) => r.subscriber_id === 250);
    expect(of250).toEqual([{ subscriber_id: 250, trigger: 'manual', refresh_run_id: runId }]);
    expect(runs.filter((r) => r.subscriber_id === 5000)).toEqual([
      { subscriber_id: 5000, trigger: 'manual', refresh_run_id: null },
    ]);
  });

  it('a large list takes the bulk lane: behind single re-syncs, ahead of the refresh', async () => {
    const s = setup();
    const started = await startRefreshRun(db(), { trigger: 'nightly' });
    if (!started.started) throw new Error('no run');
    await enqueueSyncs(
      s.queue,
      range(1, 40).map((subscriberId) => ({ subscriberId })),
      'nightly',
      { refreshRunId: started.run.id },
    );
    await enqueueSyncs(
      s.queue,
      range(101, 40).map((subscriberId) => ({ subscriberId })),
      'manual',
      { lane: 'bulk' },
    );
    await enqueueSyncs(s.queue, [{ subscriberId: 999 }], 'api');
    const lanes = await s.queue.getCountsPerPriority([0, LANE_PRIORITY.bulk, LANE_PRIORITY.refresh]);
    expect(lanes).toEqual({ 0: 1, [LANE_PRIORITY.bulk]: 40, [LANE_PRIORITY.refresh]: 40 });

    await s.startSync(1);
    await waitFor('every job to finish', async () => (await runsInOrder()).length === 81, 30_000);
    const order = (await runsInOrder()).map((r) => r.subscriber_id);
    expect(order[0]).toBe(999);
    expect(order.slice(1, 41).every((id) => id >= 101 && id <= 140)).toBe(true);
    expect(order.slice(41).every((id) => id <= 40)).toBe(true);
  });

  it('a flood of ops work leaves the running refresh its share: one slot in five', async () => {
    const s = setup();
    await db()
      .insert(subscribers)
      .values(range(1, 400).map((subscriberId) => ({ subscriberId })));
    const refreshQueue = createRefreshQueue(s.redis, s.prefix);
    cleanups.push(async () => {
      await refreshQueue.obliterate({ force: true }).catch(() => {});
      await refreshQueue.close();
    });
    // Nothing runs until both the refresh's backlog and the flood are queued.
    await s.queue.pause();
    const refresh = await startRefreshWorker(
      { db: db(), logger, syncQueue: s.queue, redis: s.redis, refreshQueue },
      { redisUrl: inject('redisUrl'), prefix: s.prefix, pollMs: 100 },
    );
    cleanups.push(() => refresh.close());
    const started = await startRefreshRun(db(), { trigger: 'manual' });
    if (!started.started) throw new Error('no run');
    const runId = started.run.id;
    await refreshQueue.add('refresh', { trigger: 'manual', refreshRunId: runId });
    await waitFor('the refresh to fan out', async () => {
      const c = await s.queue.getCountsPerPriority([LANE_PRIORITY.refresh]);
      return c[LANE_PRIORITY.refresh] === 400;
    });
    const flood = range(10_001, 600).map((subscriberId) => ({ subscriberId }));
    expect((await enqueueSyncs(s.queue, flood, 'manual', { lane: 'bulk' })).enqueued).toBe(600);

    await s.queue.resume();
    await s.startSync(2);
    const share = await waitFor(
      'the flood to be served',
      async () => {
        const r = await db().execute<{ ops: number; refresh: number }>(sql`
          select count(*) filter (where subscriber_id > 10000)::int as ops,
                 count(*) filter (where refresh_run_id = ${runId})::int as refresh
          from sync_runs`);
        const { ops, refresh: ref } = r.rows[0]!;
        return ops === 600 ? ref / (ops + ref) : false;
      },
      60_000,
    );
    // 20% is owed; what was owed in the last tick may not be paid yet when the flood ends.
    expect(share).toBeGreaterThanOrEqual(0.13);
    expect(share).toBeLessThanOrEqual(0.3);
    // And the refresh still finishes, every subscriber synced once.
    await waitFor(
      'the refresh to complete',
      async () => {
        const r = await db().execute<{ status: string }>(
          sql`select status from refresh_runs where id = ${runId}`,
        );
        return r.rows[0]?.status === 'completed';
      },
      60_000,
    );
    const twice = await db().execute<{ n: number }>(sql`
      select count(*)::int as n from (select subscriber_id from sync_runs where refresh_run_id = ${runId}
      group by 1 having count(*) > 1) t`);
    expect(twice.rows[0]!.n).toBe(0);
  });
});

describe('counting the ops jobs served', () => {
  it('sends the jobs started within a tenth of a second as one increment, and loses none', async () => {
    const { redis, prefix } = setup();
    const counter = opsServedCounter(redis, prefix);
    const key = opsServedKey(prefix);
    for (let i = 0; i < 50; i++) counter.add();
    // Nothing sent yet: the jobs are counted here first.
    expect(await redis.get(key)).toBeNull();
    await waitFor('the count of 50', async () => (await redis.get(key)) === '50', 2000);
    for (let i = 0; i < 7; i++) counter.add();
    counter.flush();
    await waitFor('the count of 57', async () => (await redis.get(key)) === '57', 2000);
  });
});
