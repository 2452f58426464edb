import { setTimeout as sleep } from 'node:timers/promises';
import { expect, it } from 'vitest';
import { useCleanups, useTestDatabase } from '../support/helpers.js';
import { waitFor } from '../support/queue-helpers.js';
import { startScenario } from './scenario.js';

// SIGTERM under load, again and again: each stopped worker finishes its in-flight jobs, exits 0
// and leaves no job active behind it (nothing for the stalled-job check to rescue).

const database = useTestDatabase();
const cleanups = useCleanups();
const SUBSCRIBERS = Number(process.env.FAULTS_SUBSCRIBERS ?? 20_000) / 2;
const STOPS = 3;

it('graceful shutdown: SIGTERM under load finishes in-flight jobs and loses none', async () => {
  const s = await startScenario({
    db: database,
    cleanups,
    subscribers: SUBSCRIBERS,
    firstId: 4_000_000,
    // Slow answers, so that every SIGTERM finds jobs in flight.
    apiArgs: ['--latency-ms', '20'],
  });
  const other = s.startWorker('--concurrency', '32');
  let stops = 0;
  let inFlightAtStop = 0;
  while (stops < STOPS) {
    const w = s.startWorker('--concurrency', '32');
    // Stopped once at work, not while starting (a busy machine can take seconds to start one).
    await waitFor('the worker to start', async () => w.stderr().includes('worker started'), 30_000);
    await sleep(500 + Math.random() * 800);
    if ((await s.queue.getJobCounts('waiting')).waiting === 0) break;
    inFlightAtStop += (await s.queue.getJobCounts('active')).active ?? 0;
    w.process.kill('SIGTERM');
    const run = await w.done;
    expect(run.code, run.stderr.slice(-2000)).toBe(0);
    expect(run.stderr).toContain('worker stopped');
    stops++;
  }
  expect(stops).toBe(STOPS);
  expect(inFlightAtStop).toBeGreaterThan(0);

  await s.drained(240_000, [other]);
  // A job a stopping worker had left active would have been rescued as stalled: none was.
  const completed = await s.queue.getJobs(['completed'], 0, -1);
  expect(completed).toHaveLength(SUBSCRIBERS);
  expect(completed.filter((j) => j.stalledCounter > 0).map((j) => j.id)).toEqual([]);

  await s.finish([other], {
    scenario: 'graceful shutdown',
    faults: `${stops} × SIGTERM of a worker under load`,
    faultCount: stops,
  });
});
