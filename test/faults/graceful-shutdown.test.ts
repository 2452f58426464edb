import { setTimeout as sleep } from 'node:timers/promises';
import { expect, it } from 'vitest';
import { API_KEY } from '../fixtures.js';
import { useCleanups, useTestDatabase } from '../helpers.js';
import { waitFor } from '../queue-helpers.js';
import { recordFaultRow } from './report.js';
import { startScenario } from './scenario.js';
import { secretsIn } from './secrets.js';

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

  await s.drained();
  other.process.kill('SIGTERM');
  expect((await other.done).code).toBe(0);
  expect(await s.queue.getJobCounts('failed')).toEqual({ failed: 0 });
  // A job a stopping worker had left active would have been rescued as stalled: none was.
  const completed = await s.queue.getJobs(['completed'], 0, -1);
  expect(completed).toHaveLength(SUBSCRIBERS);
  expect(completed.filter((j) => j.stalledCounter > 0).map((j) => j.id)).toEqual([]);

  const { lost, duplicated, unsynced, tokens } = await s.check();
  recordFaultRow({
    scenario: 'graceful shutdown',
    faults: `${stops} × SIGTERM of a worker under load`,
    faultCount: stops,
    jobs: SUBSCRIBERS,
    subscribersChecked: SUBSCRIBERS,
    lost,
    duplicated,
  });
  expect({ lost, duplicated, unsynced }).toEqual({ lost: 0, duplicated: 0, unsynced: 0 });
  expect(secretsIn(s.logs, { apiKey: API_KEY, cardTokens: tokens })).toEqual([]);
});
