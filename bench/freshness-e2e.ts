import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { type Freshness, readFreshness } from '../db/ops/freshness.js';
import { createSyncQueue, enqueueSyncs } from '../jobs/queue.js';
import { closeRedis, createRedis } from '../jobs/redis.js';
import { wilson } from '../src/freshness/index.js';
import { type ChangeClass, parseChanges, parseWakeUp, type WakeUp } from '../src/mock-api/changes.js';
import type { CreatedDates } from '../src/mock-api/created-dates.js';
import { createMockApi, type MockApi } from '../src/mock-api/server.js';
import { durationMs } from '../src/time.js';
import { lineChart } from './chart.js';
import { simulate } from './freshness/sim.js';
import type { RateClass } from './freshness/types.js';
import { BENCH_CARD_TOKEN_KEYS, benchRedis, CLI, parseFlags, resetDatabase, wholeNumber } from './harness.js';

// npm run bench:freshness-e2e [-- --subscribers 10000 --minutes 15 --warmup 5 --budget 150 --max-age 5m
//   --created-dates random|from-changes --wake-up 0.1:12/h@10m]
//
// Issue 26's end-to-end run: real workers (`cards-sync worker`, as a user starts it) against the
// sandbox, whose wallets change over wall time at the rates of `--changes`. Two set-ups side by
// side, each with its own database, queue and sandbox, the same population and the same changes
// at the same moments: REFRESH_MODE=continuous, and uniform round robin at the same request rate
// (this harness enqueues every subscriber in id order, over and over, for a worker in nightly mode
// whose cron does not fire). Every `--sample` the stored cards are compared with the sandbox's
// truth; the stale share is the share of subscribers whose copy differs. What an oracle that knew
// every rate would reach comes from the simulator (bench/freshness/sim.ts) on the same population.

const { values } = parseFlags({
  options: {
    subscribers: { type: 'string', default: '10000' },
    minutes: { type: 'string', default: '15' },
    warmup: { type: 'string', default: '5' },
    budget: { type: 'string', default: '150' },
    'max-age': { type: 'string', default: '5m' },
    'audit-share': { type: 'string', default: '0.02' },
    changes: { type: 'string', default: '0.7:0,0.2:1/h,0.08:12/h,0.02:1/m' },
    /** The sandbox's createDates: `random` (the control) or `from-changes` (issue 36's world). */
    'created-dates': { type: 'string', default: 'random' },
    /** Quiet wallets that start changing (`share:rate@after`, as `mock-api --wake-up`). */
    'wake-up': { type: 'string' },
    sample: { type: 'string', default: '10s' },
    seed: { type: 'string', default: '7' },
    chart: { type: 'string', default: 'bench/freshness-e2e.svg' },
    'redis-url': { type: 'string' },
  },
});

const n = wholeNumber('subscribers', values.subscribers, 10);
const minutes = wholeNumber('minutes', values.minutes, 2);
const warmupMin = wholeNumber('warmup', values.warmup, 0);
const budget = wholeNumber('budget', values.budget, 1);
const maxAgeMs = durationMs(values['max-age']!);
const sampleMs = durationMs(values.sample!);
const auditShare = Number(values['audit-share']);
const seed = wholeNumber('seed', values.seed, 0);
if (!maxAgeMs || !sampleMs || !(auditShare >= 0 && auditShare < 1) || warmupMin >= minutes) {
  console.error(
    '--max-age and --sample take durations (5m, 10s), --audit-share 0 to <1, --warmup < --minutes',
  );
  process.exit(2);
}
const createdDates = values['created-dates'] as CreatedDates;
if (createdDates !== 'random' && createdDates !== 'from-changes') {
  console.error(`--created-dates takes random or from-changes, not ${JSON.stringify(createdDates)}`);
  process.exit(2);
}
let classes: ChangeClass[];
let wakeUp: WakeUp | undefined;
try {
  classes = parseChanges(values.changes!);
  wakeUp = values['wake-up'] === undefined ? undefined : parseWakeUp(values['wake-up']);
} catch (error) {
  console.error((error as Error).message);
  process.exit(2);
}

const KEY = 'bench-freshness-key';
const baseUrl =
  process.env.BENCH_DATABASE_URL ?? 'postgres://postgres:postgres@127.0.0.1:5432/cards_sync_bench';
const redis = benchRedis(values['redis-url']);
type Setup = 'continuous' | 'round-robin';

interface Sample {
  atMs: number;
  stale: number;
  /** Stale among the woken wallets (`--wake-up`), and among the wallets always at their rate. */
  wokenStale: number;
  peersStale: number;
  /** Largest time since a subscriber's last success, ms. */
  oldestMs: number;
  freshness?: Freshness;
}

interface Running {
  setup: Setup;
  pool: pg.Pool;
  mock: MockApi;
  worker: ChildProcess;
  samples: Sample[];
  stop(): Promise<void>;
}

const startMs = Date.now() + 30_000; // both sandboxes' wallets start changing at this moment

async function start(setup: Setup): Promise<Running> {
  const databaseUrl = baseUrl.replace(/\/[^/]+$/, `/cards_sync_bench_fresh_${setup.replace('-', '_')}`);
  await resetDatabase(databaseUrl);
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 2 });
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
      REFRESH_MAX_AGE: values['max-age']!,
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

const truthCache = new Map<number, { version: number; key: string }>();

/** The stale count: subscribers whose stored active cards differ from the sandbox's right now. */
async function measure(r: Running): Promise<Sample> {
  const [stored, ages] = await Promise.all([
    r.pool.query<{ subscriber_id: string; cards: string }>(
      `select subscriber_id, string_agg(id || ':' || card_bank_name, ',' order by id) as cards
         from saved_cards where removed_at is null group by subscriber_id`,
    ),
    r.pool.query<{ oldest: number | null }>(
      `select extract(epoch from now() - min(last_success_at))::float8 * 1000 as oldest from subscribers`,
    ),
  ]);
  const atMs = Date.now();
  const copy = new Map(stored.rows.map((row) => [Number(row.subscriber_id), row.cards]));
  let stale = 0;
  let wokenStale = 0;
  let peersStale = 0;
  for (let id = 1; id <= n; id++) {
    // Both sandboxes hold the same changes: one key per (subscriber, version) serves both.
    const version = r.mock.version(id);
    let cached = truthCache.get(id);
    if (cached?.version !== version) {
      const key = r.mock
        .truth(id)
        .map((c) => `${c.id}:${c.cardBankName}`)
        .join(',');
      cached = { version, key };
      truthCache.set(id, cached);
    }
    if (copy.get(id) !== cached.key) {
      stale += 1;
      if (woken.has(id)) wokenStale += 1;
      else if (peers.has(id)) peersStale += 1;
    }
  }
  const sample: Sample = {
    atMs,
    stale,
    wokenStale,
    peersStale,
    oldestMs: ages.rows[0]?.oldest ?? Number.POSITIVE_INFINITY,
  };
  if (r.setup === 'continuous') sample.freshness = await readFreshness(r.pool, maxAgeMs!);
  return sample;
}

const setups: Setup[] = ['continuous', 'round-robin'];
console.error(
  `${n} subscribers, ${budget} requests/s (a uniform sweep every ${(n / budget).toFixed(0)} s), ` +
    `max age ${values['max-age']}, ${minutes} min (figures after minute ${warmupMin}), changes ${values.changes}`,
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

function pct(x: number): string {
  return `${(x * 100).toFixed(2)}%`;
}

// The figures, after the warm-up.
const report: string[] = [];
const line = (s: string) => {
  report.push(s);
  console.log(s);
};
const after = (r: Running) => r.samples.filter((s) => s.atMs >= warmMs);
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
const staleShare = (r: Running) => mean(after(r).map((s) => s.stale / n));
const syncsPerSec = async (r: Running) => {
  const { rows } = await r.pool.query<{ syncs: number; audits: number; changed: number }>(
    `select count(*)::int as syncs,
        count(*) filter (where trigger = 'audit')::int as audits,
        count(*) filter (where trigger = 'audit' and inserted + updated + removed + restored > 0)::int as changed
       from sync_runs where started_at >= $1 and started_at < $2 and status = 'succeeded'`,
    [new Date(warmMs), new Date(endMs)],
  );
  return rows[0]!;
};

// The oracle, and the simulator's forecast for the two set-ups, on this population and budget.
const rateClasses: RateClass[] = classes.map((c) => ({
  label: c.perSecond === 0 ? 'never' : `${(c.perSecond * 3600).toPrecision(3)}/h`,
  share: c.share,
  ratePerDay: c.perSecond * 86_400,
}));
const restShare = 1 - classes.reduce((s, c) => s + c.share, 0);
if (restShare > 1e-9) rateClasses.push({ label: 'never', share: restShare, ratePerDay: 0 });
const sim = (policy: 'oracle' | 'round-robin' | 'continuous') =>
  simulate(policy, {
    subscribers: n,
    classes: rateClasses,
    budgetPerDay: budget * 86_400,
    days: minutes / 1440,
    warmupDays: warmupMin / 1440,
    maxAgeDays: maxAgeMs / 86_400_000,
    auditShare,
    seed,
    tickSeconds: 1,
    replanSeconds: Math.min(600, maxAgeMs / 5000),
    snapshotSeconds: sampleMs / 1000,
    createdDates,
    ...(wakeUp
      ? {
          wakeUp: {
            share: wakeUp.share,
            ratePerDay: wakeUp.perSecond * 86_400,
            atDays: wakeUp.afterMs / 86_400_000,
          },
        }
      : {}),
  });
const oracle = sim('oracle');
const simRr = sim('round-robin');
const simCont = sim('continuous');

const [cont, rr] = runs as [Running, Running];
const contShare = staleShare(cont);
const rrShare = staleShare(rr);
const contCounts = await syncsPerSec(cont);
const rrCounts = await syncsPerSec(rr);
const seconds = (endMs - warmMs) / 1000;
line(
  `${n} subscribers, ${budget} requests/s (a sweep every ${(n / budget).toFixed(0)} s), max age ${values['max-age']}, ` +
    `${minutes} min, figures from minute ${warmupMin} on (${after(cont).length} samples every ${values.sample}), seed ${seed}`,
);
line(
  `changes: ${values.changes} (share:rate; the rest never change); createDates ${createdDates}` +
    (wakeUp ? `; wake-up ${values['wake-up']}` : ''),
);
line('');
line('| set-up | stale share (vs the sandbox) | × round robin | syncs/s | oldest copy | simulator |');
line('|---|---:|---:|---:|---:|---:|');
const oldest = (r: Running) => `${(Math.max(...after(r).map((s) => s.oldestMs)) / 1000).toFixed(0)} s`;
line(
  `| uniform round robin | ${pct(rrShare)} | 1.00 | ${(rrCounts.syncs / seconds).toFixed(1)} | ${oldest(rr)} | ${pct(simRr.staleShare)} |`,
);
line(
  `| **continuous** | **${pct(contShare)}** | **${(contShare / rrShare).toFixed(2)}** | ${(contCounts.syncs / seconds).toFixed(1)} | ${oldest(cont)} | ${pct(simCont.staleShare)} |`,
);
line(
  `| oracle (simulated, knows every rate) | — | ${(oracle.staleShare / simRr.staleShare).toFixed(2)} of simulated round robin | — | — | ${pct(oracle.staleShare)} |`,
);
// The learning goes on after the warm-up: the ratio by five-minute window shows how far it got.
for (let from = warmMs; from < endMs; from += 5 * 60_000) {
  const to = Math.min(endMs, from + 5 * 60_000);
  const inWindow = (r: Running) =>
    mean(r.samples.filter((x) => x.atMs >= from && x.atMs < to).map((x) => x.stale / n));
  line(
    `minutes ${(from - startMs) / 60_000}–${(to - startMs) / 60_000}: continuous ${pct(inWindow(cont))}, ` +
      `round robin ${pct(inWindow(rr))}, ratio ${(inWindow(cont) / inWindow(rr)).toFixed(2)}`,
  );
}
// Learning, middle and end: the span after the warm-up in thirds.
line('');
line('| window | continuous | round robin | × round robin |');
line('|---|---:|---:|---:|');
const third = (endMs - warmMs) / 3;
for (const [name, k] of [
  ['learning', 0],
  ['middle', 1],
  ['end', 2],
] as const) {
  const from = warmMs + k * third;
  const inWindow = (r: Running) =>
    mean(r.samples.filter((x) => x.atMs >= from && x.atMs < from + third).map((x) => x.stale / n));
  line(
    `| ${name} (minutes ${((from - startMs) / 60_000).toFixed(1)}–${((from + third - startMs) / 60_000).toFixed(1)}) | ` +
      `${pct(inWindow(cont))} | ${pct(inWindow(rr))} | ${(inWindow(cont) / inWindow(rr)).toFixed(2)} |`,
  );
}
if (wakeUp && woken.size > 0) {
  // Issue 36's wake-up target: the woken wallets' stale share back within 20% of their peers' (the
  // wallets always at that rate) inside one max age of waking.
  const wakeMs = startMs + wakeUp.afterMs;
  line('');
  line('| since waking | woken, continuous | peers, continuous | woken, round robin |');
  line('|---|---:|---:|---:|');
  for (let k = 0; wakeMs + k * maxAgeMs < endMs; k++) {
    const from = wakeMs + k * maxAgeMs;
    const share = (r: Running, pick: (s: Sample) => number, of: number) =>
      mean(r.samples.filter((x) => x.atMs >= from && x.atMs < from + maxAgeMs).map((x) => pick(x) / of));
    line(
      `| max age ${k + 1} | ${pct(share(cont, (s) => s.wokenStale, woken.size))} | ` +
        `${peers.size > 0 ? pct(share(cont, (s) => s.peersStale, peers.size)) : '— (no class at that rate)'} | ${pct(share(rr, (s) => s.wokenStale, woken.size))} |`,
    );
  }
}
const estimates = after(cont).map((s) => s.freshness!.estimatedStaleRatio);
const truths = after(cont).map((s) => s.stale / n);
const absError = mean(estimates.map((e, i) => Math.abs(e - truths[i]!)));
const audit = wilson(contCounts.changed, contCounts.audits);
line('');
line(
  `estimate: mean ${pct(mean(estimates))} against a true ${pct(mean(truths))} ` +
    `(mean |error| ${(absError * 100).toFixed(2)} points, relative ${((mean(estimates) / mean(truths) - 1) * 100).toFixed(0)}%)`,
);
if (audit) {
  line(
    `audit over the same minutes: ${contCounts.changed}/${contCounts.audits} changed = ${pct(audit.ratio)} ` +
      `[${pct(audit.low)}, ${pct(audit.high)}]; estimate inside: ${mean(estimates) >= audit.low && mean(estimates) <= audit.high}, ` +
      `truth inside: ${mean(truths) >= audit.low && mean(truths) <= audit.high}`,
  );
}
const last = cont.samples.at(-1)!.freshness!;
line(
  `status at the end: estimate ${pct(last.estimatedStaleRatio)}, audit ${last.audit.samples} samples ` +
    `${last.audit.staleRatio === null ? '—' : `${pct(last.audit.staleRatio)} [${pct(last.audit.low!)}, ${pct(last.audit.high!)}]`}, ` +
    `past max age ${last.pastMaxAge}, keeps max age ${last.keepsMaxAge}, truth ${pct(cont.samples.at(-1)!.stale / n)}`,
);

if (values.chart) {
  // After the warm-up: the first sweep's 100% (nobody synced yet) would flatten the rest.
  const shown = (r: Running) => after(r).slice(0, Math.min(after(cont).length, after(rr).length));
  const xs = shown(cont).map((s) => ((s.atMs - startMs) / 60_000).toFixed(1));
  const svg = lineChart(
    `Stale share against the sandbox's truth (${n} subscribers, ${budget}/s)`,
    xs.map((x, i) => (i % Math.ceil(xs.length / 10) === 0 ? `${x} min` : '')),
    'stale share (%)',
    [
      { name: 'round robin', color: '#d62728', values: shown(rr).map((s) => (s.stale / n) * 100) },
      { name: 'continuous', color: '#1f77b4', values: shown(cont).map((s) => (s.stale / n) * 100) },
      {
        name: 'its estimate',
        color: '#2ca02c',
        values: shown(cont).map((s) => s.freshness!.estimatedStaleRatio * 100),
      },
      { name: 'oracle (sim)', color: '#7f7f7f', values: shown(cont).map(() => oracle.staleShare * 100) },
    ],
    'minutes since the wallets began to change',
  );
  writeFileSync(values.chart, svg);
  console.error(`chart: ${values.chart}`);
}

await Promise.all(runs.map((r) => r.stop()));
await Promise.all(runs.map((r) => r.pool.end()));
