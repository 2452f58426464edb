import { setTimeout as sleep } from 'node:timers/promises';
import { expect, it } from 'vitest';
import { API_KEY } from '../fixtures.js';
import { useCleanups, useTestDatabase } from '../helpers.js';
import { recordFaultRow } from './report.js';
import { startScenario } from './scenario.js';
import { secretsIn } from './secrets.js';

// Two worker processes sync 20,000 subscribers while one of them is killed with SIGKILL at random
// moments, at least five times, and started again. At the end every subscriber's rows are what
// the API says, history holds each card once, and no job is lost, failed or stuck.

const database = useTestDatabase();
const cleanups = useCleanups();
const SUBSCRIBERS = Number(process.env.FAULTS_SUBSCRIBERS ?? 20_000);
const KILLS = 5;

it('worker crash: SIGKILL of a worker at random moments loses and duplicates nothing', async () => {
  const s = await startScenario({
    db: database,
    cleanups,
    subscribers: SUBSCRIBERS,
    firstId: 3_000_000,
    apiArgs: ['--latency-ms', '2'],
  });
  const workers = [s.startWorker('--concurrency', '32'), s.startWorker('--concurrency', '32')];
  let kills = 0;
  while (kills < KILLS) {
    await sleep(300 + Math.random() * 1200);
    if ((await s.queue.getJobCounts('waiting')).waiting === 0) break;
    const i = Math.random() < 0.5 ? 0 : 1;
    workers[i]!.process.kill('SIGKILL');
    await workers[i]!.done;
    kills++;
    workers[i] = s.startWorker('--concurrency', '32');
  }
  expect(kills, 'the queue ran dry before five kills: raise FAULTS_SUBSCRIBERS').toBe(KILLS);

  await s.drained();
  for (const w of workers) w.process.kill('SIGTERM');
  for (const w of workers) expect((await w.done).code).toBe(0);
  expect(await s.queue.getJobCounts('failed')).toEqual({ failed: 0 });

  const { lost, duplicated, unsynced, tokens } = await s.check();
  recordFaultRow({
    scenario: 'worker crash',
    faults: `${kills} × SIGKILL of one of two workers, restarted`,
    faultCount: kills,
    jobs: SUBSCRIBERS,
    subscribersChecked: SUBSCRIBERS,
    lost,
    duplicated,
  });
  expect({ lost, duplicated, unsynced }).toEqual({ lost: 0, duplicated: 0, unsynced: 0 });
  expect(secretsIn(s.logs, { apiKey: API_KEY, cardTokens: tokens })).toEqual([]);
});
