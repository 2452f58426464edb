import { setTimeout as sleep } from 'node:timers/promises';
import { expect, it } from 'vitest';
import { useCleanups, useTestDatabase } from '../helpers.js';
import { waitFor } from '../queue-helpers.js';
import { startScenario } from './scenario.js';
import { proxyDatabase } from './tcp-proxy.js';

// The workers reach Postgres through a proxy that the test cuts twice: every connection reset
// (transactions in flight among them), new ones refused for two seconds. Syncs fail transiently,
// hold, retry, and end right; no partial write survives.

const database = useTestDatabase();
const cleanups = useCleanups();
const SUBSCRIBERS = Number(process.env.FAULTS_SUBSCRIBERS ?? 20_000) / 4;
const CUTS = 2;

it('Postgres connection loss: cut connections, refused reconnects; every subscriber ends right', async () => {
  const { proxy, url: viaProxy } = await proxyDatabase(database.url);
  cleanups.push(() => proxy.close());

  const s = await startScenario({
    db: database,
    cleanups,
    subscribers: SUBSCRIBERS,
    firstId: 7_000_000,
    apiArgs: ['--latency-ms', '5'],
    env: { DATABASE_URL: viaProxy },
  });
  const workers = [s.startWorker('--concurrency', '16'), s.startWorker('--concurrency', '16')];
  // Cut only once both are at work (a worker that cannot reach Postgres at start exits at once).
  await waitFor(
    'the first syncs',
    async () => (await s.queue.getJobCounts('completed')).completed! > 100,
    30_000,
  );
  let cuts = 0;
  while (cuts < CUTS) {
    await sleep(800 + Math.random() * 700);
    if ((await s.queue.getJobCounts('waiting')).waiting === 0) break;
    for (const w of workers) expect(w.process.exitCode, w.stderr().slice(-1500)).toBeNull();
    proxy.cut();
    await sleep(2000);
    proxy.restore();
    cuts++;
  }
  expect(cuts).toBe(CUTS);
  expect(proxy.resets).toBeGreaterThan(0);

  await s.finish(workers, {
    scenario: 'Postgres connection loss',
    faults: `${cuts} × every Postgres connection reset, reconnects refused for 2 s (${proxy.resets} sockets reset)`,
    faultCount: cuts,
  });
});
