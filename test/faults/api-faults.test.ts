import { setTimeout as sleep } from 'node:timers/promises';
import { expect, it } from 'vitest';
import { useCleanups, useTestDatabase } from '../support/helpers.js';
import { startScenario } from './scenario.js';

// The API misbehaves throughout: one answer in ten is a 503, and a few in a hundred are late past
// the deadline, cut off half-way through their body, trickle in a byte at a time, or are 429s
// with Retry-After; twice the API process dies (in-flight requests reset, new ones refused)
// and comes back a moment later on the same port; and once it answers every request 503 for two
// seconds. Syncs fail transiently, retry, and end right.

const database = useTestDatabase();
const cleanups = useCleanups();
const SUBSCRIBERS = Number(process.env.FAULTS_SUBSCRIBERS ?? 20_000) / 4;
const OUTAGES = 2;
const STORM_MS = 2000;

it('API faults: 5xx, late, truncated, trickling and 429 answers, and two outages: every subscriber ends right', async () => {
  const s = await startScenario({
    db: database,
    cleanups,
    subscribers: SUBSCRIBERS,
    firstId: 5_000_000,
    apiArgs: [
      '--latency-ms',
      '5',
      '--fail-rate',
      '0.1',
      '--faults',
      '429=0.002,slow=0.02,truncated=0.02,trickle=0.02',
    ],
    // Ten attempts 50 ms apart, doubling: ~25 s of retries outlast any outage here.
    attempts: 10,
  });
  const workers = [s.startWorker('--concurrency', '16'), s.startWorker('--concurrency', '16')];
  // A 5xx storm first: for two seconds the API answers every request 503 (a maintenance page, an
  // overloaded upstream), then comes back.
  await sleep(700);
  expect((await s.queue.getJobCounts('waiting')).waiting).toBeGreaterThan(0);
  s.api().process.kill('SIGKILL');
  await s.restartApi(['--fail-rate', '1']);
  await sleep(STORM_MS);
  s.api().process.kill('SIGKILL');
  await s.restartApi();
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

  await s.drained(240_000, workers);
  const byCode = await database.handle.pool.query<{ code: string; n: number }>(
    `select coalesce(error_code, status) as code, count(*)::int as n from sync_runs
       where subscriber_id between $1 and $2 and status <> 'succeeded' group by 1`,
    [5_000_000, 5_000_000 + SUBSCRIBERS - 1],
  );
  const failures = Object.fromEntries(byCode.rows.map((r) => [r.code, r.n]));
  // Every kind of fault was met, and each was recorded as what it is.
  expect(Object.keys(failures).sort()).toEqual(['connection', 'http_429', 'http_5xx', 'timeout']);
  const transient = { rows: [{ n: byCode.rows.reduce((n, r) => n + r.n, 0) }] };

  await s.finish(workers, {
    scenario: 'API faults',
    faults: `503 10%, late 2%, truncated 2%, trickling 2%, 429 0.2%; ${outages} × API killed and restarted; a 503 storm of ${STORM_MS / 1000} s (${transient.rows[0]!.n} failed attempts: ${JSON.stringify(failures)})`,
    faultCount: outages + 1 + transient.rows[0]!.n,
  });
});
