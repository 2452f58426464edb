import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { createDb } from '../db/client.js';
import { createRedis } from '../jobs/redis.js';
import { createRefreshQueue } from '../jobs/refresh/index.js';
import { LANE_PRIORITY } from '../jobs/sync/lanes.js';
import { createSyncQueue } from '../jobs/sync/queue.js';
import {
  BENCH_CARD_TOKEN_KEYS,
  benchRedis,
  CLI,
  databaseFlag,
  parseFlags,
  REDIS_FLAG,
  resetDatabase,
  startMockApi,
  wholeNumber,
} from './harness.js';

// npm run bench:ops [-- --subscribers 20000 --rate 250 --probes 20]
//   A refresh of N known subscribers saturates SYNC_RATE_LIMIT_PER_SEC while an operator re-syncs
//   single subscribers with `cards-sync enqueue --id`, each one waiting at the back of the
//   refresh's backlog. Prints the latency from enqueued to the committed sync_runs row, the share of
//   the budget the refresh used, and how many subscribers were fetched twice.

const { values } = parseFlags({
  options: {
    subscribers: { type: 'string', default: '20000' },
    rate: { type: 'string', default: '250' },
    probes: { type: 'string', default: '20' },
    /** Between two probes, ms. */
    interval: { type: 'string', default: '2000' },
    /** How long the refresh runs alone before the first probe, ms: its budget share is measured then. */
    warmup: { type: 'string', default: '15000' },
    /** SYNC_CONCURRENCY of the worker: enough jobs in flight to fill the budget. */
    concurrency: { type: 'string', default: '32' },
    cards: { type: 'string', default: '3' },
    ...databaseFlag('cards_sync_bench_ops'),
    ...REDIS_FLAG,
  },
});

const n = wholeNumber('subscribers', values.subscribers, 100);
const rate = wholeNumber('rate', values.rate, 1);
const probes = wholeNumber('probes', values.probes, 1);
const interval = wholeNumber('interval', values.interval, 100);
const warmup = wholeNumber('warmup', values.warmup, 0);
const cards = wholeNumber('cards', values.cards, 0);
const concurrency = wholeNumber('concurrency', values.concurrency, 1);
const databaseUrl = values['database-url']!;
const bench = benchRedis(values['redis-url']);
const KEY = 'bench-key-0d9c2f1e';

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))] ?? 0;
};

/** Runs the CLI; `firstLineAt` is when its first line of output arrived (the job is in Redis by then). */
async function runCli(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number; out: string; firstLineAt: number }> {
  const child = spawn(process.execPath, [CLI, ...args], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  let firstLineAt = 0;
  child.stdout!.on('data', (d) => {
    if (firstLineAt === 0) firstLineAt = performance.now();
    out += d;
  });
  const [code] = await once(child, 'exit');
  return { code: code as number, out, firstLineAt };
}

async function main() {
  await resetDatabase(databaseUrl);
  const handle = createDb(databaseUrl, { max: 2, timeoutMs: 0 });
  const pool = handle.pool;
  await pool.query('insert into subscribers (subscriber_id) select g from generate_series(1, $1::int) g', [
    n,
  ]);
  const mock = await startMockApi(KEY, cards);
  // One API round trip, as the target counts it.
  const trips: number[] = [];
  for (let i = 0; i < 20; i++) {
    const t = performance.now();
    const res = await request(`${mock.url}/api/saved-cards/subscriber/${i + 1}`, {
      headers: { authorization: `Apikey ${KEY}` },
    });
    await res.body.text();
    trips.push(performance.now() - t);
  }
  const prefix = bench.tag(`bench-ops-${Date.now().toString(36)}`);
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    DATABASE_URL: databaseUrl,
    ...bench.env,
    QUEUE_PREFIX: prefix,
    CARDS_API_BASE_URL: mock.url,
    CARDS_API_KEY: KEY,
    CARD_TOKEN_KEYS: BENCH_CARD_TOKEN_KEYS,
    SYNC_RATE_LIMIT_PER_SEC: String(rate),
    SYNC_CONCURRENCY: String(concurrency),
    LOG_LEVEL: 'warn',
  };
  const worker: ChildProcess = spawn(process.execPath, [CLI, 'worker'], {
    env,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const redis = createRedis(bench.target);
  const syncQueue = createSyncQueue(redis, { prefix });
  const refreshQueue = createRefreshQueue(redis, prefix);
  while ((await syncQueue.getWorkersCount()) === 0) await sleep(100);

  const started = await runCli(['refresh'], env);
  const runId = Number(/started refresh run (\d+)/.exec(started.out)?.[1]);
  if (!runId) throw new Error(`refresh did not start: ${started.out}`);
  console.log(`refresh run ${runId} of ${n} subscribers at SYNC_RATE_LIMIT_PER_SEC=${rate}`);
  // The refresh alone (after 3 s of start-up): its share of the budget while no ops work waits.
  await sleep(Math.min(3000, warmup));
  const aloneFrom = new Date();
  await sleep(Math.max(0, warmup - 3000));
  const aloneTo = new Date();

  const windowStart = new Date();
  const results: { id: number; backlog: number; queuedMs: number; fromCliStartMs: number }[] = [];
  for (let i = 0; i < probes; i++) {
    const tick = Date.now();
    // A subscriber at the back of the refresh's backlog: fanned out, its job still waiting.
    const { rows } = await pool.query<{ id: number }>(
      `select s.subscriber_id::int as id from subscribers s
       where s.subscriber_id <= (select cursor from refresh_runs where id = $1)
         and not exists (select 1 from sync_runs r where r.subscriber_id = s.subscriber_id)
       order by s.subscriber_id desc limit 20`,
      [runId],
    );
    let id: number | undefined;
    for (const row of rows.sort(() => Math.random() - 0.5)) {
      if ((await (await syncQueue.getJob(`id:${row.id}:r${runId}`))?.getState()) === 'prioritized') {
        id = row.id;
        break;
      }
    }
    if (id === undefined) break;
    const backlog =
      (await syncQueue.getCountsPerPriority([LANE_PRIORITY.refresh]))[LANE_PRIORITY.refresh] ?? 0;
    const t0 = performance.now();
    const enq = await runCli(['enqueue', '--id', String(id)], env);
    if (enq.code !== 0) throw new Error(`enqueue failed: ${enq.out}`);
    const tQueued = enq.firstLineAt;
    for (;;) {
      const r = await pool.query(
        "select 1 from sync_runs where subscriber_id = $1 and status = 'succeeded'",
        [id],
      );
      if (r.rowCount) break;
      if (performance.now() - tQueued > 120_000) throw new Error(`subscriber ${id} never synced`);
      await sleep(5);
    }
    const done = performance.now();
    results.push({ id, backlog, queuedMs: done - tQueued, fromCliStartMs: done - t0 });
    console.log(
      `  probe ${i + 1}: subscriber ${id} behind ${backlog} refresh jobs: ${Math.round(done - tQueued)} ms queued→committed (${Math.round(done - t0)} ms from the CLI's start)`,
    );
    await sleep(Math.max(0, interval - (Date.now() - tick)));
  }
  const windowEnd = new Date();

  const expectedLeft = (n - (await syncedByRefresh())) / rate;
  // A refresh that ends within three minutes is awaited, so that "fetched twice" covers all of it.
  if (expectedLeft < 180) {
    for (;;) {
      const { rows } = await pool.query('select status from refresh_runs where id = $1', [runId]);
      if (rows[0]?.status !== 'running') break;
      await sleep(500);
    }
  }
  async function syncedByRefresh(): Promise<number> {
    const { rows } = await pool.query<{ n: number }>(
      'select count(*)::int as n from sync_runs where refresh_run_id = $1',
      [runId],
    );
    return rows[0]!.n;
  }
  const probed = results.map((r) => r.id);
  /** Syncs of the refresh (not the probed subscribers) a second between two times, over the budget. */
  const shareOf = async (from: Date, to: Date) => {
    const r = await pool.query<{ n: number }>(
      `select count(*)::int as n from sync_runs
       where refresh_run_id = $1 and subscriber_id <> all($4::bigint[]) and finished_at >= $2 and finished_at < $3`,
      [runId, from, to, probed],
    );
    return Math.round((r.rows[0]!.n / (((to.getTime() - from.getTime()) / 1000) * rate)) * 1000) / 1000;
  };
  const twice = await pool.query<{ n: number }>(
    `select count(*)::int as n from (select subscriber_id from sync_runs where started_at >= (select started_at from refresh_runs where id = $1)
       group by 1 having count(*) > 1) t`,
    [runId],
  );
  const queued = results.map((r) => r.queuedMs);
  const round = (x: number) => Math.round(x);
  const summary = {
    rate,
    subscribers: n,
    probes: results.length,
    refreshBacklogAtProbes: [
      Math.min(...results.map((r) => r.backlog)),
      Math.max(...results.map((r) => r.backlog)),
    ],
    apiRoundTripMs: Math.round(quantile(trips, 0.5) * 10) / 10,
    opsLatencyMs: {
      p50: round(quantile(queued, 0.5)),
      p95: round(quantile(queued, 0.95)),
      max: round(Math.max(...queued)),
    },
    opsLatencyFromCliStartMs: {
      p50: round(
        quantile(
          results.map((r) => r.fromCliStartMs),
          0.5,
        ),
      ),
    },
    refreshBudgetShareAlone: await shareOf(aloneFrom, aloneTo),
    refreshBudgetShareDuringProbes: await shareOf(windowStart, windowEnd),
    fetchedTwice: twice.rows[0]!.n,
    refreshSynced: await syncedByRefresh(),
    refreshFinished: expectedLeft < 180,
  };
  console.log(JSON.stringify(summary));
  worker.kill('SIGTERM');
  await once(worker, 'exit');
  mock.child.kill('SIGTERM');
  for (const q of [syncQueue, refreshQueue]) await q.obliterate({ force: true }).catch(() => {});
  await handle.close();
  process.exit(0);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
