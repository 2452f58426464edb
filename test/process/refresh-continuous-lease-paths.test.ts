import { setTimeout as sleep } from 'node:timers/promises';
import { expect, inject, it } from 'vitest';
import { haltRefreshRun } from '../../db/refresh/index.js';
import { createRedis } from '../../jobs/redis.js';
import { createRefreshQueue, openRefreshRun } from '../../jobs/refresh/index.js';
import { pauseQueue } from '../../jobs/sync/index.js';
import { startScenario } from '../faults/scenario.js';
import { useCleanups, useTestDatabase } from '../support/helpers.js';
import { leaseHolderPid } from '../support/lease-holder.js';
import { runCli, waitFor } from '../support/queue-helpers.js';

// The continuous refresh's lease beyond a crash: a window halted by the breaker is
// taken up again by the lease holder after `resume`, and the lease's marker job keeps an older
// worker from opening a second window. Real Postgres, Redis and `cards-sync worker` processes.

const database = useTestDatabase();
const cleanups = useCleanups();

interface Window {
  id: number;
  status: string;
  subscribers_total: number;
  job_id: string | null;
}

async function holdingWorker(firstId: number) {
  const s = await startScenario({
    db: database,
    cleanups,
    subscribers: 60,
    firstId,
    env: { REFRESH_MODE: 'continuous', REFRESH_BUDGET_PER_SEC: '10', REFRESH_MAX_AGE: '2m' },
  });
  const pool = database.handle.pool;
  const windows = async () =>
    (
      await pool.query<Window>(
        `select id, status, subscribers_total, job_id from refresh_runs where trigger = 'continuous' order by id`,
      )
    ).rows;
  const worker = s.startWorker();
  const window = await waitFor(
    'the worker spending a window under the lease',
    async () => {
      const run = (await windows()).find((r) => r.status === 'running');
      return (await leaseHolderPid(pool)) === worker.process.pid && run && run.subscribers_total > 0
        ? run
        : undefined;
    },
    60_000,
  );
  const redis = createRedis(inject('redisUrl'));
  cleanups.push(async () => redis.disconnect());
  return { s, worker, window, windows, redis };
}

it('a window the breaker halted is taken up again by the lease holder after `resume`: the same run goes on', async () => {
  const { s, worker, window, windows, redis } = await holdingWorker(9_700_000);
  // What the breaker does (jobs/refresh/checks.ts): the queue paused first, then the run halted.
  const reason = 'test: 30 of 60 answered subscribers lost every card';
  await pauseQueue(s.queue, redis, { by: 'breaker', reason: `refresh run ${window.id} halted: ${reason}` });
  expect(await haltRefreshRun(database.handle.db, window.id, reason)).toBe(true);
  // Halted, the holder spends nothing and opens no window of its own.
  await sleep(1500);
  const [halted] = await windows();
  await sleep(3000);
  expect(await windows()).toEqual([halted]);
  expect(halted).toMatchObject({ id: window.id, status: 'halted' });
  expect(await leaseHolderPid(database.handle.pool)).toBe(worker.process.pid);

  const resumed = await runCli(['resume'], s.env);
  expect(resumed.code, resumed.stderr).toBe(0);
  expect(resumed.stdout).toContain(`refresh run ${window.id} continues from where it halted`);
  await waitFor(
    'the same window handing out budget again',
    async () => {
      const rows = await windows();
      return (
        rows.length === 1 &&
        rows[0]!.id === window.id &&
        rows[0]!.status === 'running' &&
        rows[0]!.subscribers_total > halted!.subscribers_total + 5
      );
    },
    15_000,
  );
  worker.process.kill('SIGTERM');
  expect((await worker.done).code).toBe(0);
}, 150_000);

it("an older worker's minute job finds the lease's window alive by its marker: no second window, none abandoned", async () => {
  const { s, worker, window, windows, redis } = await holdingWorker(9_800_000);
  const refreshQueue = createRefreshQueue(redis, s.env.QUEUE_PREFIX!);
  cleanups.push(() => refreshQueue.close());
  const marker = `continuous-lease-r${window.id}`;
  expect(window.job_id).toBe(marker);
  await waitFor(
    'the window marked',
    async () => (await (await refreshQueue.getJob(marker))?.getState()) === 'delayed',
    10_000,
  );
  // An older worker's every-minute job (payload without a run id) opens its window through
  // openRefreshRun, unchanged since that release: a run in progress whose job is not alive is
  // abandoned and a new one opened. The marker is what keeps the lease's window alive to it.
  for (const jobId of ['repeat:older-1', 'repeat:older-2']) {
    const opened = await openRefreshRun(
      database.handle.db,
      refreshQueue,
      { trigger: 'continuous', jobId },
      jobId,
    );
    expect(opened.started).toBe(false);
    if (!opened.started) expect(opened.inProgress.id).toBe(window.id);
  }
  const rows = await windows();
  expect(rows).toHaveLength(1);
  expect(rows[0]).toMatchObject({ id: window.id, status: 'running', job_id: marker });
  worker.process.kill('SIGTERM');
  expect((await worker.done).code).toBe(0);
}, 150_000);

it('a rollback: the last holder of this release stopped with SIGTERM takes its marker along, and an older worker carries on at once', async () => {
  const { s, worker, window, windows, redis } = await holdingWorker(9_900_000);
  const refreshQueue = createRefreshQueue(redis, s.env.QUEUE_PREFIX!);
  cleanups.push(() => refreshQueue.close());
  const marker = `continuous-lease-r${window.id}`;
  await waitFor(
    'the window marked',
    async () => (await (await refreshQueue.getJob(marker))?.getState()) === 'delayed',
    10_000,
  );
  worker.process.kill('SIGTERM');
  expect((await worker.done).code).toBe(0);
  expect(await refreshQueue.getJob(marker)).toBeUndefined();
  // An older worker's every-minute job no longer finds the window alive: it opens its own.
  const opened = await openRefreshRun(
    database.handle.db,
    refreshQueue,
    { trigger: 'continuous', jobId: 'repeat:older-1' },
    'repeat:older-1',
  );
  expect(opened.started).toBe(true);
  const rows = await windows();
  expect(rows[0]).toMatchObject({ id: window.id, status: 'abandoned' });
}, 150_000);
