import { setTimeout as sleep } from 'node:timers/promises';
import { expect, inject, it } from 'vitest';
import { createRedis } from '../../jobs/redis.js';
import { createRefreshQueue } from '../../jobs/refresh/index.js';
import { startScenario } from '../faults/scenario.js';
import { useCleanups, useTestDatabase } from '../support/helpers.js';
import { leaseHolderPid } from '../support/lease-holder.js';
import { type CliProcess, waitFor } from '../support/queue-helpers.js';

// REFRESH_MODE=continuous with two real `cards-sync worker` processes: the one holding the
// continuous refresh's lease is killed with SIGKILL, and the other carries on with the same
// refresh run within seconds; then a SIGTERM hands it over at once. "Within 10 s" is a bound
// for a loaded machine, not a benchmark (the fault suite measures it: test/faults/continuous-crash).

const database = useTestDatabase();
const cleanups = useCleanups();

interface Window {
  id: number;
  status: string;
  subscribers_total: number;
}

it('the continuous refresh survives a SIGKILL of its lease holder: another worker continues the same run within seconds', async () => {
  const s = await startScenario({
    db: database,
    cleanups,
    subscribers: 60,
    firstId: 9_500_000,
    env: { REFRESH_MODE: 'continuous', REFRESH_BUDGET_PER_SEC: '10', REFRESH_MAX_AGE: '2m' },
  });
  const pool = database.handle.pool;
  const windows = async () =>
    (
      await pool.query<Window>(
        `select id, status, subscribers_total from refresh_runs where trigger = 'continuous' order by id`,
      )
    ).rows;
  const workers: CliProcess[] = [s.startWorker(), s.startWorker()];
  const holderOf = async () => {
    const pid = await leaseHolderPid(pool);
    return workers.find(
      (w) => w.process.pid === pid && w.process.exitCode === null && w.process.signalCode === null,
    );
  };

  const holder = await waitFor(
    'a lease holder handing out budget',
    async () => {
      const w = await holderOf();
      const run = (await windows()).find((r) => r.status === 'running');
      return w && run && run.subscribers_total > 0 ? w : undefined;
    },
    30_000,
  );
  const [before] = await windows();
  holder.process.kill('SIGKILL');
  await holder.done;
  const killedAt = Date.now();

  const survivor = await waitFor('the other worker holding the lease', holderOf, 10_000);
  expect(survivor).not.toBe(holder);
  // The same run goes on (adopted, neither abandoned nor opened again): claims keep coming.
  const after = await waitFor(
    'the run handing out budget again',
    async () => {
      const rows = await windows();
      return rows.length === 1 && rows[0]!.subscribers_total > before!.subscribers_total + 5
        ? rows[0]
        : undefined;
    },
    10_000,
  );
  expect(Date.now() - killedAt).toBeLessThan(10_000);
  expect(after).toMatchObject({ id: before!.id, status: 'running' });

  // A graceful shutdown lets the lease go at once: a third worker takes it.
  const third = s.startWorker();
  workers.push(third);
  await waitFor(
    'the third worker started',
    async () => /worker started/.test(third.stdout() + third.stderr()),
    20_000,
  );
  await sleep(500);
  survivor.process.kill('SIGTERM');
  const stoppedAt = Date.now();
  const taken = await waitFor(
    'the third worker holding the lease',
    async () => (await holderOf()) === third,
    10_000,
  );
  expect(taken).toBe(true);
  expect(Date.now() - stoppedAt).toBeLessThan(10_000);
  // Counted once the third holds the lease: the survivor's own claims before its SIGTERM would
  // otherwise pass for the third's, before the third has even marked the window (as CI once saw).
  const [atTakeover] = await windows();
  expect((await survivor.done).code).toBe(0);
  await waitFor(
    'the run going on under the third worker',
    async () => {
      const rows = await windows();
      return (
        rows.length === 1 &&
        rows[0]!.status === 'running' &&
        rows[0]!.subscribers_total > atTakeover!.subscribers_total
      );
    },
    10_000,
  );
  // The stopping holder removed its window's marker (for a rollback); the next holder marks it again.
  const redis = createRedis(inject('redisUrl'));
  cleanups.push(async () => redis.disconnect());
  const refreshQueue = createRefreshQueue(redis, s.env.QUEUE_PREFIX!);
  cleanups.push(() => refreshQueue.close());
  const marker = `continuous-lease-r${(await windows())[0]!.id}`;
  expect(await (await refreshQueue.getJob(marker))?.getState()).toBe('delayed');
  third.process.kill('SIGTERM');
  expect((await third.done).code).toBe(0);
}, 120_000);
