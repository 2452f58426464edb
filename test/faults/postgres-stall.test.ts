import { setTimeout as sleep } from 'node:timers/promises';
import { expect, it } from 'vitest';
import { useCleanups, useTestDatabase } from '../helpers.js';
import { waitFor } from '../queue-helpers.js';
import { startScenario } from './scenario.js';
import { proxyDatabase } from './tcp-proxy.js';

// The workers reach Postgres through a proxy that, twice, silences every open connection for good
// (no reset, no answer: a dropped NAT entry, a frozen host) while new connections work. A query on
// a silent connection must give up after DATABASE_TIMEOUT_MS and its connection be replaced;
// without that, its batch waits forever and the jobs in it are never finished nor retried.

const database = useTestDatabase();
const cleanups = useCleanups();
const SUBSCRIBERS = Number(process.env.FAULTS_SUBSCRIBERS ?? 20_000) / 4;
const STALLS = 2;

it('Postgres stall: silent connections are given up and replaced; every subscriber ends right', async () => {
  const { proxy, url: viaProxy } = await proxyDatabase(database.url);
  cleanups.push(() => proxy.close());

  const s = await startScenario({
    db: database,
    cleanups,
    subscribers: SUBSCRIBERS,
    firstId: 9_000_000,
    apiArgs: ['--latency-ms', '5'],
    env: { DATABASE_URL: viaProxy, DATABASE_TIMEOUT_MS: '2000' },
  });
  const workers = [s.startWorker('--concurrency', '16'), s.startWorker('--concurrency', '16')];
  await waitFor(
    'the first syncs',
    async () => (await s.queue.getJobCounts('completed')).completed! > 100,
    30_000,
  );
  let stalls = 0;
  while (stalls < STALLS) {
    await sleep(800 + Math.random() * 700);
    if ((await s.queue.getJobCounts('waiting')).waiting === 0) break;
    proxy.stall();
    stalls++;
  }
  expect(stalls).toBe(STALLS);
  expect(proxy.stalls).toBeGreaterThan(0);

  await s.finish(workers, {
    scenario: 'Postgres stall',
    faults: `${stalls} × every open Postgres connection silenced for good (${proxy.stalls} connections)`,
    faultCount: stalls,
  });
});
