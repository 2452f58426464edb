import { sql } from 'drizzle-orm';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { lastRefreshCompletedAt } from '../../db/admin/index.js';
import { loadRefreshRun, startRefreshRun } from '../../db/refresh/index.js';
import { subscribers } from '../../db/schema/index.js';
import {
  createRefreshQueue,
  registerNightlyScheduler,
  startRefreshWorker,
} from '../../jobs/refresh/index.js';
import { createAdminApp } from '../../src/admin/app.js';
import { createMetrics } from '../../src/metrics/index.js';
import { ADMIN_TOKEN } from '../support/fixtures.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';
import { runCli, testQueue, waitFor } from '../support/queue-helpers.js';

// A refresh planned within the rate budget: flagged at its start when it cannot finish before the
// next scheduled one (log, status, metric), and a run that matches nobody is not a success.

const database = useTestDatabase();
const { logger, lines } = captureLogger('info');
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await database.handle.db.execute(sql`truncate refresh_runs, sync_runs, subscribers`);
});
const db = () => database.handle.db;

function setup() {
  const q = testQueue();
  cleanups.push(q.cleanup);
  const refreshQueue = createRefreshQueue(q.redis, q.prefix);
  cleanups.push(async () => {
    await refreshQueue.obliterate({ force: true }).catch(() => {});
    await refreshQueue.close();
  });
  const env = { REDIS_URL: inject('redisUrl'), QUEUE_PREFIX: q.prefix, DATABASE_URL: database.url };
  const startRefresh = async (rateLimitPerSec: number) => {
    const w = await startRefreshWorker(
      { db: db(), logger, syncQueue: q.queue, redis: q.redis, refreshQueue },
      { redisUrl: inject('redisUrl'), prefix: q.prefix, pollMs: 100, rateLimitPerSec },
    );
    cleanups.push(() => w.close());
    return w;
  };
  const page = async (path: string) => {
    const admin = createAdminApp({
      db: db(),
      redis: q.redis,
      syncQueue: q.queue,
      refreshQueue,
      metrics: createMetrics({ defaultMetrics: false }),
      logger,
      adminToken: ADMIN_TOKEN,
      prefix: q.prefix,
    });
    const headers = { authorization: `Bearer ${ADMIN_TOKEN}` };
    return (await admin.app.fetch(new Request(`http://x${path}`, { headers }))).text();
  };
  const metricsText = () => page('/metrics');
  return { ...q, refreshQueue, env, startRefresh, metricsText, page };
}

async function startManual(refreshQueue: ReturnType<typeof setup>['refreshQueue'], staleBefore?: Date) {
  const started = await startRefreshRun(db(), { trigger: 'manual', staleBefore });
  if (!started.started) throw new Error('a run is in progress');
  await refreshQueue.add('refresh', { trigger: 'manual', refreshRunId: started.run.id });
  return started.run.id;
}

describe('refresh plan', () => {
  it('a run that cannot finish before the next scheduled one is flagged at its start: log, status, status --json, metric', async () => {
    const s = setup();
    await db()
      .insert(subscribers)
      .values(Array.from({ length: 600 }, (_, i) => ({ subscriberId: i + 1 })));
    // The next scheduled refresh is at most a minute away; 600 subscribers at 2/s take 5 minutes.
    await registerNightlyScheduler(s.refreshQueue, '* * * * *', 'UTC');
    await s.queue.pause(); // nothing syncs: the plan is all there is to see
    await s.startRefresh(2);
    const id = await startManual(s.refreshQueue);
    const run = await waitFor('the plan', async () => {
      const r = await loadRefreshRun(db(), id);
      return r?.plannedSubscribers != null ? r : false;
    });
    expect(run).toMatchObject({ plannedSubscribers: 600, rateBudgetPerSec: 2 });
    expect(run.expectedFinishAt!.getTime() - run.startedAt.getTime()).toBe(300_000);
    expect(run.nextRefreshAt!.getTime() - Date.now()).toBeLessThanOrEqual(60_000);
    await waitFor('the warning', async () =>
      lines.some((l) => l.includes(`refresh run ${id} cannot finish before the next scheduled refresh`)),
    );

    const text = await runCli(['status'], s.env);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(
      /progress: 0 of 600 done \(budget 2\/s\), ETA \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ/,
    );
    expect(text.stdout).toContain('WILL OVERRUN: refresh run');
    expect(text.stdout).toContain('600 subscribers at SYNC_RATE_LIMIT_PER_SEC 2 take 0.1 h');
    const json = await runCli(['status', '--json'], s.env);
    const progress = JSON.parse(json.stdout).refreshProgress;
    expect(progress).toMatchObject({ planned: 600, done: 0, ratePerSec: null });
    expect(progress.overrun).toContain('Raise SYNC_RATE_LIMIT_PER_SEC');

    const metrics = await s.metricsText();
    expect(metrics).toContain('cards_sync_refresh_overrun 1');
    expect(metrics).toContain('cards_sync_refresh_subscribers{state="planned"} 600');
    expect(metrics).toMatch(/cards_sync_refresh_eta_timestamp_seconds [1-9]\d+/);
    const overview = await s.page('/admin');
    expect(overview).toMatch(
      /<span id="refresh-done">0<\/span> of 600 done · no rate yet · budget 2\/s · ETA/,
    );
    expect(overview).toContain('id="refresh-overrun">Will overrun: refresh run');
  });

  it('a run that fits its budget before the next scheduled one is not flagged', async () => {
    const s = setup();
    await db()
      .insert(subscribers)
      .values([{ subscriberId: 1 }, { subscriberId: 2 }]);
    await registerNightlyScheduler(s.refreshQueue, '0 2 * * *', 'UTC');
    await s.queue.pause();
    await s.startRefresh(100);
    const id = await startManual(s.refreshQueue);
    await waitFor('the plan', async () => (await loadRefreshRun(db(), id))?.plannedSubscribers === 2);
    expect(await s.metricsText()).toContain('cards_sync_refresh_overrun 0');
    const text = await runCli(['status'], s.env);
    expect(text.stdout).toContain('progress: 0 of 2 done (budget 100/s)');
    expect(text.stdout).not.toContain('OVERRUN');
  });

  it('a run that matches nobody closes as empty: not the last success, no full bar, and status says so', async () => {
    const s = setup();
    await db()
      .insert(subscribers)
      .values([{ subscriberId: 1, lastSuccessAt: new Date() }]);
    await s.startRefresh(0);
    const id = await startManual(s.refreshQueue, new Date(Date.now() - 36 * 3600_000));
    const run = await waitFor('the run to close', async () => {
      const r = await loadRefreshRun(db(), id);
      return r?.status !== 'running' ? r : false;
    });
    expect(run).toMatchObject({ status: 'empty', plannedSubscribers: 0, subscribersTotal: 0 });
    expect(await lastRefreshCompletedAt(db())).toBeNull();
    expect(await s.metricsText()).toContain('cards_sync_last_refresh_success_timestamp_seconds 0');
    const text = await runCli(['status'], s.env);
    expect(text.stdout).toContain('EMPTY');
    expect(text.stdout).toContain('matched no subscriber, nothing was synced (not a success)');
    const overview = await s.page('/admin');
    expect(overview).toContain('It matched no subscriber');
    expect(overview).toContain('<div class="bar"><div style="width:0%">');
  });
});
