import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { closeRedis, createRedis } from '../jobs/redis.js';
import { createSyncQueue, enqueueSyncs } from '../jobs/sync/queue.js';
import { createMockApi } from '../src/mock-api/server.js';
import { forecast } from './freshness-e2e/forecast.js';
import { type Running, type Setup, sampler, syncCounts } from './freshness-e2e/measure.js';
import { pct, printReport, writeChart } from './freshness-e2e/report.js';
import { readSettings } from './freshness-e2e/settings.js';
import { BENCH_CARD_TOKEN_KEYS, benchRedis, CLI, parseFlags, resetDatabase, seedingPool } from './harness.js';

// npm run bench:freshness-e2e [-- --subscribers 10000 --minutes 15 --warmup 5 --budget 150 --max-age 5m
//   --created-dates random|from-changes --wake-up 0.1:12/h@10m]
//
// The end-to-end freshness run: real workers (`cards-sync worker`, as a user starts it) against the
// sandbox, whose wallets change over wall time at the rates of `--changes`. Two set-ups side by
// side, each with its own database, queue and sandbox, the same population and the same changes
// at the same moments: REFRESH_MODE=continuous, and uniform round robin at the same request rate
// (this harness enqueues every subscriber in id order, over and over, for a worker in nightly mode
// whose cron does not fire). Every `--sample` the stored cards are compared with the sandbox's
// truth; the stale share is the share of subscribers whose copy differs. What an oracle that knew
// every rate would reach comes from the simulator (bench/freshness/sim.ts) on the same population.
//
// This file reads the flags, starts the two set-ups and samples them; the flags are checked in
// bench/freshness-e2e/settings.ts, the samples taken in measure.ts, the simulator's forecast made
// in forecast.ts, and the tables and chart printed in report.ts.

const { values } = parseFlags({
  options: {
    subscribers: { type: 'string', default: '10000' },
    minutes: { type: 'string', default: '15' },
    warmup: { type: 'string', default: '5' },
    budget: { type: 'string', default: '150' },
    'max-age': { type: 'string', default: '5m' },
    'audit-share': { type: 'string', default: '0.02' },
    changes: { type: 'string', default: '0.7:0,0.2:1/h,0.08:12/h,0.02:1/m' },
    /** The sandbox's createDates: `random` (the control) or `from-changes` (the createDate world). */
    'created-dates': { type: 'string', default: 'random' },
    /** Quiet wallets that start changing (`share:rate@after`, as `mock-api --wake-up`). */
    'wake-up': { type: 'string' },
    sample: { type: 'string', default: '10s' },
    seed: { type: 'string', default: '7' },
    chart: { type: 'string', default: 'bench/freshness-e2e.svg' },
    'redis-url': { type: 'string' },
  },
});

const settings = readSettings(values);
const { subscribers: n, minutes, warmupMin, budget, maxAgeMs, sampleMs, auditShare, seed } = settings;
const { createdDates, classes, wakeUp } = settings;

const KEY = 'bench-freshness-key';
const baseUrl =
  process.env.BENCH_DATABASE_URL ?? 'postgres://postgres:postgres@127.0.0.1:5432/cards_sync_bench';
const redis = benchRedis(settings.flags.redisUrl);

const startMs = Date.now() + 30_000; // both sandboxes' wallets start changing at this moment

async function start(setup: Setup): Promise<Running> {
  const databaseUrl = baseUrl.replace(/\/[^/]+$/, `/cards_sync_bench_fresh_${setup.replace('-', '_')}`);
  await resetDatabase(databaseUrl);
  const pool = seedingPool(databaseUrl, 2);
  // Every subscriber known and never synced, as after an import of ids.
  await pool.query('insert into subscribers (subscriber_id) select g from generate_series(1, $1::int) g', [
    n,
  ]);
  const mock = createMockApi({
    apiKey: KEY,
    recordRequests: false,
    latencyMs: 5,
    changes: { classes, seed, startMs, createdDates, ...(wakeUp ? { wakeUp } : {}) },
  });
  await mock.start();
  const prefix = redis.tag(`fresh-${setup}-${Date.now().toString(36)}`);
  const worker = spawn(process.execPath, [CLI, 'worker'], {
    stdio: ['ignore', 'inherit', 'inherit'],
    env: {
      ...process.env,
      ...redis.env,
      DATABASE_URL: databaseUrl,
      CARDS_API_BASE_URL: mock.url,
      CARDS_API_KEY: KEY,
      CARD_TOKEN_KEYS: BENCH_CARD_TOKEN_KEYS,
      QUEUE_PREFIX: prefix,
      LOG_LEVEL: 'warn',
      SYNC_RATE_LIMIT_PER_SEC: String(Math.ceil(budget * 1.1)),
      REFRESH_MODE: setup === 'continuous' ? 'continuous' : 'nightly',
      REFRESH_BUDGET_PER_SEC: String(budget),
      REFRESH_MAX_AGE: settings.flags.maxAge,
      REFRESH_AUDIT_SHARE: String(auditShare),
      REFRESH_CRON: '0 0 1 1 *', // never within the run: the harness drives round robin itself
    },
  });
  let stopping = false;
  let driver: Promise<void> = Promise.resolve();
  const connection = createRedis(redis.target);
  const queue = createSyncQueue(connection, { prefix });
  if (setup === 'round-robin') {
    // `budget` requests a second, in id order, round and round: a token bucket topped up every 100 ms.
    driver = (async () => {
      let next = 1;
      let owed = 0;
      let last = Date.now();
      while (!stopping) {
        await sleep(100);
        const now = Date.now();
        owed += ((now - last) / 1000) * budget;
        last = now;
        const count = Math.floor(owed);
        owed -= count;
        const targets = Array.from({ length: count }, () => {
          const subscriberId = next;
          next = (next % n) + 1;
          return { subscriberId };
        });
        await enqueueSyncs(queue, targets, 'manual');
      }
    })();
  }
  return {
    setup,
    pool,
    mock,
    worker,
    samples: [],
    async stop() {
      stopping = true;
      await driver;
      worker.kill('SIGTERM');
      if (worker.exitCode === null) await once(worker, 'exit');
      await queue.obliterate({ force: true }).catch(() => {});
      await queue.close();
      await closeRedis(connection);
      await mock.stop();
    },
  };
}

/** With `--wake-up`: the wallets that wake, and their peers (always at the woken rate), as the sandbox has them. */
const woken = new Set<number>();
const peers = new Set<number>();
const measure = sampler(n, maxAgeMs, woken, peers);

const setups: Setup[] = ['continuous', 'round-robin'];
console.error(
  `${n} subscribers, ${budget} requests/s (a uniform sweep every ${(n / budget).toFixed(0)} s), ` +
    `max age ${settings.flags.maxAge}, ${minutes} min (figures after minute ${warmupMin}), changes ${settings.flags.changes}`,
);
const runs = await Promise.all(setups.map(start));
if (wakeUp) {
  for (let id = 1; id <= n; id++) {
    if (runs[0]!.mock.wokenAt(id) !== null) woken.add(id);
    else if (Math.abs(runs[0]!.mock.changeRate(id) - wakeUp.perSecond) < 1e-12) peers.add(id);
  }
  console.error(
    `wake-up: ${woken.size} quiet wallets wake at minute ${wakeUp.afterMs / 60_000}; ${peers.size} always at that rate`,
  );
}
const endMs = startMs + minutes * 60_000;
const warmMs = startMs + warmupMin * 60_000;
await sleep(Math.max(0, startMs - Date.now()));
for (let at = startMs; at < endMs; at += sampleMs) {
  await sleep(Math.max(0, at - Date.now()));
  for (const r of runs) r.samples.push(await measure(r));
  const [c, rr] = runs.map((r) => r.samples.at(-1)!);
  console.error(
    `${((Date.now() - startMs) / 60_000).toFixed(1)} min: stale continuous ${pct(c!.stale / n)}` +
      ` (estimate ${pct(c!.freshness?.estimatedStaleRatio ?? 0)}), round robin ${pct(rr!.stale / n)}`,
  );
}

await sleep(Math.max(0, endMs - Date.now()));

const sim = forecast(settings);
const [cont, rr] = runs as [Running, Running];
const contCounts = await syncCounts(cont, warmMs, endMs);
const rrCounts = await syncCounts(rr, warmMs, endMs);
const record = { settings, startMs, warmMs, endMs, woken, peers, cont, rr };
printReport(record, contCounts, rrCounts, sim);
if (settings.flags.chart) writeChart(settings.flags.chart, record, sim.oracle);

await Promise.all(runs.map((r) => r.stop()));
await Promise.all(runs.map((r) => r.pool.end()));
