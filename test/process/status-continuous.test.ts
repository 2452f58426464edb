import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  loadRefreshRun,
  type RefreshRun,
  savePlan,
  savePolicy,
  startRefreshRun,
} from '../../db/refresh/index.js';
import { createRefreshQueue, progressOf, registerRefreshMode } from '../../jobs/refresh/index.js';
import { formatDuration } from '../../src/shared/index.js';
import { isContinuous } from '../../src/status/index.js';
import { adminFor } from '../support/admin-helpers.js';
import { useTestDatabase } from '../support/helpers.js';
import { runCli, testQueue } from '../support/queue-helpers.js';

// What `status`, `status --json` and the overview say in REFRESH_MODE=continuous: a
// window spends a request budget, so they speak of requests spent of it, who is due now and how
// old the oldest copy is; never of a nightly run, of "subscribers done" or of a cursor.

const database = useTestDatabase();
const q = testQueue();
let refreshQueue: ReturnType<typeof createRefreshQueue>;
let run: RefreshRun;
const WINDOW_MS = 3_600_000;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  refreshQueue = createRefreshQueue(q.redis, q.prefix);
  await registerRefreshMode(refreshQueue, 'continuous', { pattern: '0 2 * * *', tz: 'UTC' });
  const pool = database.handle.pool;
  // A 2-minute max age, 40 requests/s: the figures of the issue, for 3,000 subscribers.
  await savePolicy(pool, {
    mode: 'continuous',
    thresholdDays: null,
    priorRatePerDay: 720,
    priorMixture: null,
    maxAgeSeconds: 120,
    budgetPerSec: 40,
    auditShare: 0.02,
    subscribers: 3000,
    keepsMaxAge: true,
    maxAgeNeedsPerSec: 25,
  });
  await pool.query(`
    insert into subscribers (subscriber_id, last_success_at, next_refresh_at)
    select g, now() - interval '30 seconds', now() + interval '1 minute' from generate_series(1, 2990) g`);
  // Five due and past the max age (their last success 10 minutes ago), five never synced.
  await pool.query(`
    insert into subscribers (subscriber_id, last_success_at, next_refresh_at)
    select g, now() - interval '10 minutes', now() - interval '5 seconds' from generate_series(2991, 2995) g`);
  await pool.query(`
    insert into subscribers (subscriber_id) select g from generate_series(2996, 3000) g`);
  const started = await startRefreshRun(database.handle.db, { trigger: 'continuous' });
  if (!started.started) throw new Error('a refresh is already in progress');
  // Three minutes into an hour's window: 7,711 requests handed out of its 144,000.
  await pool.query(
    `update refresh_runs set started_at = now() - interval '3 minutes', subscribers_total = 7711, enqueued = 7711,
       succeeded = 7600, failed = 10, not_found = 40 where id = $1`,
    [started.run.id],
  );
  const startedAt = (await loadRefreshRun(database.handle.db, started.run.id))!.startedAt;
  run = await savePlan(database.handle.db, started.run.id, {
    plannedSubscribers: 144_000,
    rateBudgetPerSec: 40,
    expectedFinishAt: new Date(startedAt.getTime() + WINDOW_MS),
    nextRefreshAt: null,
  });
});
afterAll(async () => {
  for (const cleanup of cleanups) await cleanup();
  await refreshQueue.obliterate({ force: true }).catch(() => {});
  await refreshQueue.close();
  await q.cleanup();
});

const env = () => ({ REDIS_URL: inject('redisUrl'), QUEUE_PREFIX: q.prefix, DATABASE_URL: database.url });

describe('REFRESH_MODE=continuous as operators read it', () => {
  it('status: the window, its budget spent, who is due, the oldest copy; no nightly run, no ETA, no cursor', async () => {
    const text = await runCli(['status'], env());
    expect(text.code, text.stderr).toBe(0);
    const out = text.stdout;
    expect(out).not.toContain('nightly refresh');
    expect(out).not.toMatch(/of 144000 done|ETA|cursor 0|fanned out/);
    expect(out).toContain(`continuous refresh: window ${run.id}: running since `);
    expect(out).toMatch(
      /^ {2}budget: 7711 of its 144000 requests spent \(7\d{3} allowed by now at 40\/s\); 7650 syncs ended: succeeded 7600, failed 10, not found 40, invalid 0$/m,
    );
    expect(out).toMatch(/^ {2}due now: 10 subscribers; 5 past the max age of 2m; 5 never synced$/m);
    expect(out).toMatch(
      /^ {2}oldest copy: 10(\.\d)?m old \(last success \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ\)$/m,
    );
    expect(out).toContain('max age 2m: 5 subscribers past it');
  });

  it('status --json: the existing keys, and a `continuous` block with the same figures', async () => {
    const res = await runCli(['status', '--json'], env());
    expect(res.code, res.stderr).toBe(0);
    const json = JSON.parse(res.stdout);
    for (const key of ['queue', 'data', 'freshness', 'fleet', 'refreshProgress', 'recentActions'])
      expect(json).toHaveProperty(key);
    expect(json.queue.refreshMode).toBe('continuous');
    expect(json.continuous).toMatchObject({
      window: {
        refreshRunId: run.id,
        status: 'running',
        endsAt: run.expectedFinishAt!.toISOString(),
        budgetPerSec: 40,
        budgetRequests: 144_000,
        spent: 7711,
        ended: { total: 7650, succeeded: 7600, failed: 10, notFound: 40, invalid: 0 },
      },
      dueNow: 10,
      pastMaxAge: 5,
      maxAgeSeconds: 120,
      neverSynced: 5,
    });
    expect(json.continuous.window.allowedByNow).toBeGreaterThanOrEqual(7200);
    expect(json.continuous.window.allowedByNow).toBeLessThan(7711);
    expect(json.continuous.oldestCopy.ageSeconds).toBeGreaterThanOrEqual(600);
    expect(json.continuous.oldestCopy.ageSeconds).toBeLessThan(660);
    // A window ends when its hour is up, not when 144,000 "subscribers" would be done at its rate.
    expect(json.refreshProgress.etaAt).toBe(run.expectedFinishAt!.toISOString());
  });

  it('the overview: the max age as the CLI writes it, and the continuous figures in place of a nightly run', async () => {
    const html = await adminFor(database, q, cleanups)('/admin');
    expect(html).toContain('5 past the max age of 2m.');
    expect(html).not.toContain('0 h');
    expect(html).not.toMatch(/nightly/i);
    expect(html).not.toContain('ETA');
    expect(html).toMatch(/Continuous refresh: window <b>\d+<\/b> running since/);
    expect(html).toMatch(
      /<b id="budget-spent">7711<\/b> of its 144000 requests spent \(7\d{3} allowed by now at 40\/s\)/,
    );
    expect(html).toContain(
      'Due now: <b id="due-now">10</b> subscribers · <b>5</b> past the max age of 2m · 5 never synced',
    );
    expect(html).toMatch(/Oldest copy: <b id="oldest-copy-age">10(\.\d)?m<\/b> old/);
  });
});

describe('the figures underneath', () => {
  it('durations as the CLI writes them: whole units where they fall, an age to a tenth of its unit', () => {
    expect(formatDuration(120)).toBe('2m');
    expect(formatDuration(7 * 86_400)).toBe('7d');
    expect(formatDuration(36 * 3600)).toBe('36h');
    expect(formatDuration(90)).toBe('90s');
    expect(formatDuration(0)).toBe('0s');
    expect(formatDuration(12_345)).toBe('3.4h');
    expect(formatDuration(150)).toBe('2.5m');
  });

  it('continuous when its scheduler is registered; a nightly scheduler wins over a last continuous run', () => {
    expect(isContinuous({ refreshMode: 'continuous' }, null)).toBe(true);
    expect(isContinuous({ refreshMode: 'nightly' }, run)).toBe(false);
    expect(isContinuous({ refreshMode: null }, run)).toBe(true);
    expect(isContinuous({ refreshMode: null }, null)).toBe(false);
  });

  it("a window's ETA is its end, even at a rate that would take longer", () => {
    const slow = { ...run, succeeded: 10, failed: 0, notFound: 0, invalid: 0 };
    expect(progressOf(slow).etaAt).toEqual(run.expectedFinishAt);
  });
});
