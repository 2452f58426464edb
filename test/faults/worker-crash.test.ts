import { setTimeout as sleep } from 'node:timers/promises';
import { expect, it } from 'vitest';
import { useCleanups, useTestDatabase } from '../support/helpers.js';
import { startScenario } from './scenario.js';

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

  await s.finish(workers, {
    scenario: 'worker crash',
    faults: `${kills} × SIGKILL of one of two workers, restarted`,
    faultCount: kills,
  });
});
