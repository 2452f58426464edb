import { setTimeout as sleep } from 'node:timers/promises';
import { expect, it } from 'vitest';
import { useCleanups, useTestDatabase } from '../support/helpers.js';
import { waitFor } from '../support/queue-helpers.js';
import { startScenario } from './scenario.js';
import { proxyDatabase, type TcpProxy } from './tcp-proxy.js';

// The workers reach Postgres through a proxy that the test disturbs twice while they sync:
// - connection loss: every connection reset (transactions in flight among them), new ones refused
//   for two seconds. Syncs fail transiently, hold, retry, and end right; no partial write survives.
// - stall: every open connection silenced for good (no reset, no answer: a dropped NAT entry, a
//   frozen host) while new connections work. A query on a silent connection must give up after
//   DATABASE_TIMEOUT_MS and its connection be replaced; without that, its batch waits forever and
//   the jobs in it are never finished nor retried.

const database = useTestDatabase();
const cleanups = useCleanups();
const SUBSCRIBERS = Number(process.env.FAULTS_SUBSCRIBERS ?? 20_000) / 4;
const TIMES = 2;

/** Runs two workers behind the proxy, applies `fault` twice while work is waiting, then checks. */
async function behindProxy(o: {
  firstId: number;
  env?: Record<string, string>;
  fault: (proxy: TcpProxy) => Promise<void>;
  scenario: string;
  describe: (proxy: TcpProxy) => string;
}) {
  const { proxy, url } = await proxyDatabase(database.url);
  cleanups.push(() => proxy.close());
  const s = await startScenario({
    db: database,
    cleanups,
    subscribers: SUBSCRIBERS,
    firstId: o.firstId,
    apiArgs: ['--latency-ms', '5'],
    env: { DATABASE_URL: url, ...o.env },
  });
  const workers = [s.startWorker('--concurrency', '16'), s.startWorker('--concurrency', '16')];
  // Only once both are at work (a worker that cannot reach Postgres at start exits at once).
  await waitFor(
    'the first syncs',
    async () => (await s.queue.getJobCounts('completed')).completed! > 100,
    30_000,
  );
  let times = 0;
  while (times < TIMES) {
    await sleep(800 + Math.random() * 700);
    if ((await s.queue.getJobCounts('waiting')).waiting === 0) break;
    for (const w of workers) expect(w.process.exitCode, w.stderr().slice(-1500)).toBeNull();
    await o.fault(proxy);
    times++;
  }
  expect(times).toBe(TIMES);
  await s.finish(workers, {
    scenario: o.scenario,
    faults: `${times} × ${o.describe(proxy)}`,
    faultCount: times,
  });
  return proxy;
}

it('Postgres connection loss: cut connections, refused reconnects; every subscriber ends right', async () => {
  const proxy = await behindProxy({
    firstId: 7_000_000,
    fault: async (p) => {
      p.cut();
      await sleep(2000);
      p.restore();
    },
    scenario: 'Postgres connection loss',
    describe: (p) =>
      `every Postgres connection reset, reconnects refused for 2 s (${p.resets} sockets reset)`,
  });
  expect(proxy.resets).toBeGreaterThan(0);
});

it('Postgres stall: silent connections are given up and replaced; every subscriber ends right', async () => {
  const proxy = await behindProxy({
    firstId: 9_000_000,
    env: { DATABASE_TIMEOUT_MS: '2000' },
    fault: async (p) => p.stall(),
    scenario: 'Postgres stall',
    describe: (p) => `every open Postgres connection silenced for good (${p.stalls} connections)`,
  });
  expect(proxy.stalls).toBeGreaterThan(0);
});
