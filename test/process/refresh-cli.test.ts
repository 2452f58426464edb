import { desc, sql } from 'drizzle-orm';
import { describe, expect, inject, it } from 'vitest';
import { abandonRefreshRun, startRefreshRun } from '../../db/refresh/index.js';
import { refreshRuns, subscribers } from '../../db/schema/index.js';
import { createRefreshQueue } from '../../jobs/refresh/index.js';
import { useCleanups, useTestDatabase } from '../support/helpers.js';
import { runCli, testQueue } from '../support/queue-helpers.js';

// `cards-sync refresh` as a user runs it: a child process against real Redis and Postgres.

const database = useTestDatabase();
const cleanups = useCleanups();

function setup() {
  const q = testQueue();
  const refreshQueue = createRefreshQueue(q.redis, q.prefix);
  cleanups.push(q.cleanup, async () => {
    await refreshQueue.obliterate({ force: true });
    await refreshQueue.close();
  });
  const env = { REDIS_URL: inject('redisUrl'), QUEUE_PREFIX: q.prefix, DATABASE_URL: database.url };
  return { ...q, refreshQueue, env };
}

describe('cards-sync refresh', () => {
  it('--stale 36h opens a manual run of stale subscribers and queues it; a second start is refused', async () => {
    const q = setup();
    await database.handle.db.insert(subscribers).values([{ subscriberId: 1 }, { subscriberId: 2 }]);
    const before = Date.now();
    const run = await runCli(['refresh', '--stale', '36h'], q.env);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(
      /^started refresh run \d+ of subscribers not synced since \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ; /,
    );

    const [row] = await database.handle.db.select().from(refreshRuns).orderBy(desc(refreshRuns.id)).limit(1);
    expect(row).toMatchObject({ trigger: 'manual', status: 'running' });
    const staleAge = before - row!.staleBefore!.getTime();
    expect(staleAge).toBeGreaterThanOrEqual(36 * 3600_000 - 5000);
    expect(staleAge).toBeLessThanOrEqual(36 * 3600_000 + 5000);
    const jobs = await q.refreshQueue.getJobs(['waiting']);
    expect(jobs.map((j) => j.data)).toEqual([{ v: 1, trigger: 'manual', refreshRunId: row!.id }]);

    const again = await runCli(['refresh'], q.env);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`refresh run ${row!.id} (manual) is already running`);
    expect(await q.refreshQueue.getJobs(['waiting'])).toHaveLength(1);

    // The refused start used up no id: the next run takes the one after.
    await abandonRefreshRun(database.handle.db, row!.id, 'test');
    await q.refreshQueue.obliterate({ force: true });
    const third = await runCli(['refresh'], q.env);
    expect(third.code, third.stderr).toBe(0);
    expect(third.stdout).toContain(`started refresh run ${row!.id + 1} `);
    await database.handle.db.execute(sql`truncate refresh_runs, subscribers`);
  });

  it('in continuous mode: refused, saying the window is always open and what to run instead', async () => {
    const q = setup();
    await database.handle.db.insert(subscribers).values([{ subscriberId: 1 }, { subscriberId: 2 }]);
    const window = await startRefreshRun(database.handle.db, { trigger: 'continuous' });
    expect(window.started).toBe(true);
    const id = window.started ? window.run.id : 0;
    try {
      const run = await runCli(['refresh'], q.env);
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(
        new RegExp(
          `^cards-sync: refresh run ${id} \\(continuous\\) is already running, started [^;]+; ` +
            'with REFRESH_MODE=continuous a refresh window is always open .*so a manual refresh never starts beside it\\. ' +
            'For a one-off sweep, queue the subscribers with `cards-sync enqueue --file PATH` ',
        ),
      );
      expect(run.stderr).toContain('follow the window with `cards-sync status`');
      expect(await q.refreshQueue.getJobs(['waiting'])).toHaveLength(0);
    } finally {
      await abandonRefreshRun(database.handle.db, id, 'test');
      await database.handle.db.execute(sql`truncate refresh_runs, subscribers`);
    }
  });

  it('--stale that matches nobody starts no run: it says so, exit 0, and nothing reads as a refresh', async () => {
    const q = setup();
    await database.handle.db.insert(subscribers).values([
      { subscriberId: 7, lastSuccessAt: new Date() },
      { subscriberId: 8, lastSuccessAt: new Date() },
    ]);
    const run = await runCli(['refresh', '--stale', '36h'], q.env);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(
      /^nothing to refresh: every known subscriber synced successfully since \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ; no run started/,
    );
    expect(await database.handle.db.select().from(refreshRuns)).toHaveLength(0);
    expect(await q.refreshQueue.getJobs(['waiting'])).toHaveLength(0);
    const status = await runCli(['status'], q.env);
    expect(status.stdout).toContain('refresh: none has run yet');
    await database.handle.db.execute(sql`truncate subscribers`);
  });

  for (const bad of ['3x', '0h', '-1d', '36']) {
    it(`--stale ${bad}: exit 2 naming --stale, nothing started`, async () => {
      const q = setup();
      const runsBefore = (await database.handle.db.select().from(refreshRuns)).length;
      const run = await runCli(['refresh', '--stale', bad], q.env);
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(/--stale/);
      expect(await database.handle.db.select().from(refreshRuns)).toHaveLength(runsBefore);
      expect(await q.refreshQueue.getJobs(['waiting'])).toHaveLength(0);
    });
  }
});
