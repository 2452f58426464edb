import { setTimeout as sleep } from 'node:timers/promises';
import { expect, it } from 'vitest';
import { API_KEY } from '../fixtures.js';
import { useCleanups, useTestDatabase } from '../helpers.js';
import { recordFaultRow } from './report.js';
import { startScenario } from './scenario.js';
import { secretsIn } from './secrets.js';

// The API misbehaves: one answer in ten is a 503 throughout, and twice the API process dies
// (in-flight requests reset, new ones refused) and comes back a moment later on the same port.
// Syncs fail transiently, retry with backoff, and end right.

const database = useTestDatabase();
const cleanups = useCleanups();
const SUBSCRIBERS = Number(process.env.FAULTS_SUBSCRIBERS ?? 20_000) / 4;
const OUTAGES = 2;

it('API faults: a 5xx storm and two outages of the API end with every subscriber right', async () => {
  const s = await startScenario({
    db: database,
    cleanups,
    subscribers: SUBSCRIBERS,
    firstId: 5_000_000,
    apiArgs: ['--latency-ms', '5', '--fail-rate', '0.1'],
    // Ten attempts 50 ms apart, doubling: ~25 s of retries outlast any outage here.
    attempts: 10,
  });
  const workers = [s.startWorker('--concurrency', '16'), s.startWorker('--concurrency', '16')];
  let outages = 0;
  while (outages < OUTAGES) {
    await sleep(500 + Math.random() * 500);
    if ((await s.queue.getJobCounts('waiting')).waiting === 0) break;
    s.api().process.kill('SIGKILL');
    await sleep(1000);
    await s.restartApi();
    outages++;
  }
  expect(outages).toBe(OUTAGES);

  await s.drained();
  for (const w of workers) w.process.kill('SIGTERM');
  for (const w of workers) expect((await w.done).code).toBe(0);
  expect(await s.queue.getJobCounts('failed')).toEqual({ failed: 0 });
  // The faults were felt: transient failures were recorded and retried.
  const transient = await database.handle.pool.query<{ n: number }>(
    `select count(*)::int as n from sync_runs where subscriber_id between $1 and $2 and status = 'failed'
       and error_code in ('http_5xx', 'connection', 'timeout')`,
    [5_000_000, 5_000_000 + SUBSCRIBERS - 1],
  );
  expect(transient.rows[0]!.n).toBeGreaterThan(0);

  const { lost, duplicated, unsynced, tokens } = await s.check();
  recordFaultRow({
    scenario: 'API faults',
    faults: `10% of answers 503; ${outages} × API killed and restarted (${transient.rows[0]!.n} transient failures)`,
    faultCount: outages + transient.rows[0]!.n,
    jobs: SUBSCRIBERS,
    subscribersChecked: SUBSCRIBERS,
    lost,
    duplicated,
  });
  expect({ lost, duplicated, unsynced }).toEqual({ lost: 0, duplicated: 0, unsynced: 0 });
  expect(secretsIn(s.logs, { apiKey: API_KEY, cardTokens: tokens })).toEqual([]);
});
