import { Job } from 'bullmq';
import { eq, sql } from 'drizzle-orm';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { createDb } from '../../db/client.js';
import { loadRefreshRun, type SweepCursor, startRefreshRun, subscriberPage } from '../../db/refresh/index.js';
import { refreshRuns, subscribers, syncRuns } from '../../db/schema/index.js';
import { registerSubscribers } from '../../db/sync/index.js';
import {
  createRefreshQueue,
  openRefreshRun,
  type RefreshJobData,
  type RefreshOptions,
  registerNightlyScheduler,
  SCHEDULER_ID,
  startRefreshWorker,
} from '../../jobs/refresh/index.js';
import { readPauseReason, startSyncWorker } from '../../jobs/sync/index.js';
import { createApiClient } from '../../src/api/index.js';
import { cardsFor } from '../../src/mock-api/data.js';
import { API_KEY, ok, testTokens, useScriptedApi } from '../support/fixtures.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';
import { testQueue, waitFor } from '../support/queue-helpers.js';

const database = useTestDatabase();
const upstream = useScriptedApi();
const { logger, lines } = captureLogger();
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await database.handle.db.execute(
    sql`truncate refresh_runs, sync_runs, subscribers, saved_cards, saved_card_change_log`,
  );
  upstream.script.clear();
});

const db = () => database.handle.db;

async function seedSubscribers(ids: number[], lastSuccessAt: Date | null = null) {
  await db()
    .insert(subscribers)
    .values(ids.map((subscriberId) => ({ subscriberId, lastSuccessAt })));
}

function setup(options: RefreshOptions = {}) {
  const q = testQueue({ attempts: 2 });
  cleanups.push(q.cleanup);
  const refreshQueue = createRefreshQueue(q.redis, q.prefix);
  cleanups.push(async () => {
    await refreshQueue.obliterate({ force: true }).catch(() => {});
    await refreshQueue.close();
  });
  const api = createApiClient({
    baseUrl: upstream.url,
    apiKey: API_KEY,
    pathStyle: 'standard',
    timeoutMs: 2000,
  });
  cleanups.push(() => api.close());
  const startSync = async (concurrency = 8, goneAfterNotFound?: number) => {
    const w = await startSyncWorker(
      {
        db: db(),
        api,
        logger,
        tokens: testTokens,
        queue: q.queue,
        redis: q.redis,
        ...(goneAfterNotFound !== undefined ? { goneAfterNotFound } : {}),
      },
      { redisUrl: inject('redisUrl'), prefix: q.prefix, concurrency },
    );
    cleanups.push(() => w.close(5000));
    return w;
  };
  const startRefresh = async (extra: RefreshOptions = {}, ownDb = db()) => {
    const w = await startRefreshWorker(
      { db: ownDb, logger, syncQueue: q.queue, redis: q.redis },
      { redisUrl: inject('redisUrl'), prefix: q.prefix, pollMs: 100, ...options, ...extra },
    );
    cleanups.push(() => w.close());
    return w;
  };
  return { ...q, refreshQueue, startSync, startRefresh };
}

async function finishedRun(id: number, timeoutMs = 30_000) {
  return waitFor(
    `refresh run ${id} to finish`,
    async () => {
      const run = await loadRefreshRun(db(), id);
      return run?.status === 'completed' || run?.status === 'halted' ? run : false;
    },
    timeoutMs,
  );
}

async function manualRun(refreshQueue: ReturnType<typeof setup>['refreshQueue'], staleBefore?: Date) {
  const started = await startRefreshRun(db(), { trigger: 'manual', staleBefore });
  if (!started.started) throw new Error('a run is in progress');
  await refreshQueue.add('refresh', { trigger: 'manual', refreshRunId: started.run.id });
  return started.run.id;
}

describe('nightly scheduler', () => {
  it('two processes registering at once leave one scheduler; a changed pattern replaces it', async () => {
    const s = setup();
    const other = createRefreshQueue(s.redis, s.prefix);
    cleanups.push(() => other.close());
    await Promise.all([
      registerNightlyScheduler(s.refreshQueue, '0 2 * * *', 'UTC'),
      registerNightlyScheduler(other, '0 2 * * *', 'UTC'),
    ]);
    const schedulers = await s.refreshQueue.getJobSchedulers();
    expect(schedulers.map((j) => j.key)).toEqual([SCHEDULER_ID]);
    const next = await registerNightlyScheduler(s.refreshQueue, '30 3 * * *', 'Europe/Istanbul');
    expect(new Date(next!).toISOString()).toMatch(/T00:30:00/);
    expect((await s.refreshQueue.getJobSchedulers()).map((j) => j.pattern)).toEqual(['30 3 * * *']);
  });

  it('fires on a short pattern and runs a nightly refresh', async () => {
    const s = setup();
    await seedSubscribers([70_001, 70_002]);
    await s.startSync();
    await s.startRefresh();
    await registerNightlyScheduler(s.refreshQueue, '*/1 * * * * *', 'UTC');
    const run = await waitFor('a nightly run', async () => {
      const [r] = await db().select().from(refreshRuns).where(eq(refreshRuns.trigger, 'nightly'));
      return r;
    });
    expect((await finishedRun(run.id)).status).toBe('completed');
    await s.refreshQueue.removeJobScheduler(SCHEDULER_ID);
  });
});

describe('refresh runs', () => {
  it('refreshes every known subscriber once and closes the run with counts that add up', async () => {
    const s = setup({ pageSize: 25, window: 40 });
    const ids = Array.from({ length: 120 }, (_, i) => 71_000 + i);
    await seedSubscribers(ids);
    upstream.script.set('id:71003', { status: 404 });
    upstream.script.set('id:71004', ok([{ id: 1 }]));
    upstream.script.set('id:71005', { status: 500 });
    await s.startSync();
    await s.startRefresh();
    const id = await manualRun(s.refreshQueue);
    const run = await finishedRun(id);
    const expectedCards = ids
      .filter((i) => ![71_003, 71_004, 71_005].includes(i))
      .reduce((n, i) => n + cardsFor(i).length, 0);
    expect(run).toMatchObject({
      status: 'completed',
      trigger: 'manual',
      subscribersTotal: 120,
      enqueued: 120,
      succeeded: 117,
      notFound: 1,
      invalid: 1,
      failed: 1,
      cardsAdded: expectedCards,
      cardsRemoved: 0,
    });
    expect(run.finishedAt).not.toBeNull();
    const perSubscriber = await db().execute<{ n: number }>(
      sql`select count(*)::int as n from sync_runs where refresh_run_id = ${id} group by subscriber_id having count(*) > 1 and subscriber_id <> 71005`,
    );
    expect(perSubscriber.rows).toEqual([]);
  });

  it('counts cards listed again as restored, not as added', async () => {
    const s = setup({ pageSize: 25, window: 40 });
    const ids = Array.from({ length: 40 }, (_, i) => 72_000 + i).filter((i) => cardsFor(i).length >= 2);
    const dropping = ids.slice(0, 3);
    await seedSubscribers(ids);
    await s.startSync();
    await s.startRefresh();
    const first = await finishedRun(await manualRun(s.refreshQueue));
    const all = ids.reduce((n, i) => n + cardsFor(i).length, 0);
    expect(first).toMatchObject({ cardsAdded: all, cardsRestored: 0, cardsRemoved: 0 });
    // Each of three wallets loses its first card upstream, then lists it again.
    for (const i of dropping) upstream.script.set(`id:${i}`, ok(cardsFor(i).slice(1)));
    const second = await finishedRun(await manualRun(s.refreshQueue));
    expect(second).toMatchObject({ cardsAdded: 0, cardsRestored: 0, cardsRemoved: 3 });
    upstream.script.clear();
    const third = await finishedRun(await manualRun(s.refreshQueue));
    expect(third).toMatchObject({ cardsAdded: 0, cardsRestored: 3, cardsRemoved: 0 });
  });

  it('a refresh already in progress is not started twice', async () => {
    const first = await startRefreshRun(db(), { trigger: 'manual' });
    const [a, b] = await Promise.all([
      startRefreshRun(db(), { trigger: 'nightly' }),
      startRefreshRun(db(), { trigger: 'manual' }),
    ]);
    expect(first.started).toBe(true);
    expect(a.started || b.started).toBe(false);
  });

  it('a run whose refresh job is gone is abandoned instead of blocking every later refresh', async () => {
    const s = setup();
    const stuck = await startRefreshRun(db(), { trigger: 'nightly', jobId: 'a-job-that-failed-for-good' });
    expect(stuck.started).toBe(true);
    const next = await openRefreshRun(db(), s.refreshQueue, { trigger: 'manual' });
    expect(next.started).toBe(true);
    const old = await loadRefreshRun(db(), stuck.started ? stuck.run.id : 0);
    expect(old).toMatchObject({ status: 'abandoned' });
    expect(old!.haltedReason).toContain('refresh job is gone');
    // A live one is not abandoned: its job is waiting in the queue.
    const live = await openRefreshRun(db(), s.refreshQueue, { trigger: 'manual' });
    expect(live.started).toBe(false);
  });

  it('a failed refresh job keeps its message in Redis but no stack trace', async () => {
    const s = setup();
    await s.startRefresh();
    // Data the refresh worker refuses: the attempt fails and waits for its retry.
    const added = await s.refreshQueue.add('refresh', { trigger: 'bogus' } as unknown as RefreshJobData);
    const job = await waitFor('the first attempt to fail', async () => {
      const j = await Job.fromId(s.refreshQueue, added.id!);
      return j?.failedReason ? j : false;
    });
    expect(job.failedReason).toMatch(/trigger/);
    expect(job.stacktrace).toEqual([]);
  });

  it('--stale picks only subscribers whose last success is older than the duration', async () => {
    const s = setup();
    const now = Date.now();
    await seedSubscribers([72_001, 72_002], new Date(now - 3 * 86_400_000));
    await seedSubscribers([72_003], null);
    await seedSubscribers([72_004, 72_005], new Date(now - 3_600_000));
    await s.startSync();
    await s.startRefresh();
    const id = await manualRun(s.refreshQueue, new Date(now - 36 * 3_600_000));
    const run = await finishedRun(id);
    expect(run.subscribersTotal).toBe(3);
    const synced = await db()
      .select({ id: syncRuns.subscriberId })
      .from(syncRuns)
      .where(eq(syncRuns.refreshRunId, id))
      .orderBy(syncRuns.subscriberId);
    expect(synced.map((r) => r.id)).toEqual([72_001, 72_002, 72_003]);
  });

  it('a fan-out killed mid-way resumes from its cursor without double-enqueueing', async () => {
    const s = setup({ pageSize: 10, window: 20, lockDurationMs: 1500 });
    const ids = Array.from({ length: 100 }, (_, i) => 73_000 + i);
    await seedSubscribers(ids);
    // The doomed worker has its own connections, so that "killing" it cuts it off for real.
    const doomedDb = createDb(database.url, { max: 2 });
    const doomed = await s.startRefresh({}, doomedDb.db);
    const id = await manualRun(s.refreshQueue);
    // No sync worker yet: the fan-out fills its window and waits.
    const before = await waitFor('the fan-out to block on its window', async () => {
      const run = await loadRefreshRun(db(), id);
      return run && run.enqueued >= 20 ? run : false;
    });
    expect(before.cursor).toBeGreaterThan(0);
    // Kill: its database goes away mid-loop and it stops renewing its lock; another worker takes over.
    await doomedDb.close();
    await doomed.worker.close(true);
    await s.startRefresh();
    await s.startSync();
    const run = await finishedRun(id);
    expect(run).toMatchObject({ status: 'completed', subscribersTotal: 100, enqueued: 100, succeeded: 100 });
    const twice = await db().execute<{ subscriber_id: number }>(
      sql`select subscriber_id from sync_runs where refresh_run_id = ${id} group by subscriber_id having count(*) > 1`,
    );
    expect(twice.rows).toEqual([]);
    expect(lines.some((l) => l.includes('refresh resumed from its cursor'))).toBe(true);
  });

  it('the breaker halts a run whose answers wipe too many subscribers, and resume continues it', async () => {
    const s = setup({ breakerMinSyncs: 50, maxWipeRatio: 0.2 });
    const ids = Array.from({ length: 150 }, (_, i) => 74_000 + i);
    await seedSubscribers(ids);
    const sync = await s.startSync(4);
    await s.startRefresh();
    const first = await finishedRun(await manualRun(s.refreshQueue));
    expect(first.status).toBe('completed');
    // Upstream outage: every answer is an empty list.
    for (const i of ids) upstream.script.set(`id:${i}`, ok([]));
    const id = await manualRun(s.refreshQueue);
    const halted = await finishedRun(id);
    expect(halted.status).toBe('halted');
    expect(halted.haltedReason).toContain('REFRESH_MAX_WIPE_RATIO');
    expect(await s.queue.isPaused()).toBe(true);
    expect((await readPauseReason(s.queue, s.redis))?.by).toBe('breaker');
    const removedSoFar = await db().execute<{ n: number }>(
      sql`select count(distinct subscriber_id)::int as n from saved_card_changes where change = 'removed'`,
    );
    expect(removedSoFar.rows[0]!.n).toBeLessThan(150);
    // The operator checked and resumes: the run continues and completes.
    const { resumeProcessing } = await import('../../jobs/refresh/control.js');
    const { continuedRefreshRunId: continued } = await resumeProcessing({
      db: db(),
      syncQueue: s.queue,
      refreshQueue: s.refreshQueue,
      redis: s.redis,
    });
    expect(continued).toBe(id);
    const done = await waitFor('the run to complete', async () => {
      const run = await loadRefreshRun(db(), id);
      return run?.status === 'completed' ? run : false;
    });
    expect(done).toMatchObject({ succeeded: 150, wipedSubscribers: 150, breakerOverridden: true });
    // Every removal is in the history, so a later sync restores what the outage wiped.
    for (const i of ids) upstream.script.delete(`id:${i}`);
    const restoreRun = await finishedRun(await manualRun(s.refreshQueue));
    expect(restoreRun.status).toBe('completed');
    const restored = await db().execute<{ n: number }>(
      sql`select count(*)::int as n from saved_card_changes where change = 'restored' and sync_run_id in (select id from sync_runs where refresh_run_id = ${restoreRun.id})`,
    );
    expect(restored.rows[0]!.n).toBe(ids.reduce((n, i) => n + cardsFor(i).length, 0));
    void sync;
  }, 60_000);

  it('the breaker counts subscribers SYNC_GONE_AFTER_NOT_FOUND wiped, as it counts empty answers', async () => {
    const s = setup({ breakerMinSyncs: 50, maxWipeRatio: 0.2 });
    const ids = Array.from({ length: 150 }, (_, i) => 75_000 + i);
    await seedSubscribers(ids);
    await s.startSync(4, 1);
    await s.startRefresh();
    expect((await finishedRun(await manualRun(s.refreshQueue))).status).toBe('completed');
    // The API forgets everyone: no sync succeeds, yet every answer takes a subscriber's cards.
    for (const i of ids) upstream.script.set(`id:${i}`, { status: 404 });
    const id = await manualRun(s.refreshQueue);
    const halted = await finishedRun(id);
    expect(halted.status).toBe('halted');
    expect(halted.haltedReason).toMatch(/of \d+ answered subscribers .* REFRESH_MAX_WIPE_RATIO/);
    expect((await readPauseReason(s.queue, s.redis))?.by).toBe('breaker');
    const { resumeProcessing } = await import('../../jobs/refresh/control.js');
    await resumeProcessing({ db: db(), syncQueue: s.queue, refreshQueue: s.refreshQueue, redis: s.redis });
    const done = await waitFor('the run to complete', async () => {
      const run = await loadRefreshRun(db(), id);
      return run?.status === 'completed' ? run : false;
    });
    const cards = ids.reduce((n, i) => n + cardsFor(i).length, 0);
    expect(done).toMatchObject({ succeeded: 0, notFound: 150, wipedSubscribers: 150, cardsRemoved: cards });
    const reasons = await db().execute<{ reason: string | null; n: number }>(
      sql`select reason, count(*)::int as n from saved_card_changes where change = 'removed' group by reason`,
    );
    expect(reasons.rows).toEqual([{ reason: 'not_found', n: cards }]);
  }, 60_000);
});

describe('the nightly sweep through the schedule', () => {
  it('pages through one enqueue of more than a page (one due time to the microsecond) once each, writing no schedule row', async () => {
    // 1,200 ids made known by one enqueue, never synced: one `now()` for all of their due times.
    const ids = Array.from({ length: 1200 }, (_, i) => 910_001 + i);
    await registerSubscribers(db(), ids, (maxAgeMs) => maxAgeMs / 8, 7 * 86_400_000);
    const before = await database.handle.pool.query<{ xmins: string }>(
      "select string_agg(xmin::text, ',' order by subscriber_id) as xmins from subscriber_schedule",
    );
    const runStartedAt = new Date();
    const seen: number[] = [];
    let cursor: SweepCursor = { after: 0, afterDue: null };
    for (let page = 0; page < 5; page++) {
      const next = await subscriberPage(db(), cursor, 500, null, runStartedAt);
      seen.push(...next.ids);
      cursor = next.cursor;
      if (next.ids.length < 500) break;
    }
    expect(seen.length).toBe(1200);
    expect(new Set(seen).size).toBe(1200);
    // A sweep reads the schedule; it does not rewrite it (each row a non-HOT update, with its index).
    const after = await database.handle.pool.query<{ xmins: string }>(
      "select string_agg(xmin::text, ',' order by subscriber_id) as xmins from subscriber_schedule",
    );
    expect(after.rows[0]!.xmins).toBe(before.rows[0]!.xmins);
    await database.handle.pool.query('truncate subscriber_schedule');
  });
});
