import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { createSyncQueue, enqueueSyncs } from '../jobs/queue.js';
import { createRedis } from '../jobs/redis.js';
import { lineChart } from './chart.js';
import { postgresCpuMs, processCpuMs, redisCpuMs } from './cpu.js';
import { benchRedis, resetDatabase, startMockApi, wholeNumber } from './harness.js';

// npm run bench [-- --subscribers 20000 --cards 5 --concurrency 64]
//   Three pipelines over the same data (and f, the floor), in one run on one machine; the ratios are what counts.
// npm run bench -- --curve [5000,10000,20000,40000,80000] [--chart bench/curve.svg]
//   cards-sync alone at growing sizes: is the cost per subscriber flat?

const { values } = parseArgs({
  options: {
    subscribers: { type: 'string', default: '20000' },
    cards: { type: 'string', default: '5' },
    // Jobs in flight per worker. 64, not the worker's default 16: at 16 every pipeline, the ceiling
    // included, is bound by one job's latency rather than by what the machine can do.
    concurrency: { type: 'string', default: '64' },
    /** Sizes of the scaling curve (cards-sync alone), comma-separated. */
    curve: { type: 'string' },
    /** Where the curve's SVG chart goes. */
    chart: { type: 'string', default: 'bench/curve.svg' },
    /**
     * Rounds of the pipelines, one after another (a, c, c unchanged, f; b in the first only): the
     * ratios are taken within each round and their median is reported, so that a drift of the
     * shared machine's speed during one pipeline does not decide the verdict.
     */
    rounds: { type: 'string', default: '3' },
    /** Comma-separated subset of pipelines to run (a,b,c,f), for profiling one of them. */
    only: { type: 'string' },
    /** Write a V8 CPU profile of each pipeline's worker process into this folder. */
    'cpu-prof': { type: 'string' },
    'database-url': {
      type: 'string',
      default:
        process.env.BENCH_DATABASE_URL ?? 'postgres://postgres:postgres@127.0.0.1:5432/cards_sync_bench',
    },
    /** Default: the topology of the environment (REDIS_URL, REDIS_SENTINELS…, REDIS_CLUSTER_NODES). */
    'redis-url': { type: 'string' },
  },
});
const n = wholeNumber('subscribers', values.subscribers, 1);
const rounds = wholeNumber('rounds', values.rounds, 1);
const k = wholeNumber('cards', values.cards, 0);
wholeNumber('concurrency', values.concurrency, 1);
const databaseUrl = values['database-url']!;
const bench = benchRedis(values['redis-url']);
const KEY = 'bench-key-0d9c2f1e';
const here = new URL('.', import.meta.url).pathname;

const round = (x: number, d = 0) => Math.round(x * 10 ** d) / 10 ** d;

interface Result {
  pipeline: string;
  jobs: number;
  seconds: number;
  subscribersPerSec: number;
  /** The second half of the jobs alone: the steady rate, without start-up and warm-up. */
  steadySubscribersPerSec: number;
  cardsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  peakRssMB: number;
  redisPeakMB?: number;
  /** CPU ms per subscriber spent by each part: the worker, the mock API, Redis and Postgres. */
  cpuMsPerSubscriber?: { worker: number; api: number; redis: number; postgres: number };
  workerCpuMs?: number;
}

async function runPipeline(
  pipeline: string,
  api: { url: string; child: ChildProcess },
  count = n,
): Promise<Result> {
  const apiUrl = api.url;
  const prefix = bench.tag(`bench-${pipeline}-${Date.now().toString(36)}`);
  const redis = createRedis(bench.target, { blocking: true });
  const queue = createSyncQueue(redis, { prefix });
  for (let i = 0; i < count; i += 1000) {
    const ids = Array.from({ length: Math.min(1000, count - i) }, (_, j) => 1 + i + j);
    await enqueueSyncs(
      queue,
      ids.map((subscriberId) => ({ subscriberId })),
      'manual',
    );
  }
  const used = async () => Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1] ?? 0);
  let redisPeak = await used();
  const sampler = setInterval(() => {
    used().then(
      (m) => {
        redisPeak = Math.max(redisPeak, m);
      },
      () => {},
    );
  }, 100);
  const cpuBefore = {
    api: processCpuMs(api.child.pid!),
    redis: await redisCpuMs(redis),
    pg: postgresCpuMs(),
  };
  const child = spawn(
    process.execPath,
    [
      ...(values['cpu-prof'] ? ['--cpu-prof', '--cpu-prof-dir', values['cpu-prof']] : []),
      `${here}pipeline-worker.js`,
      '--pipeline',
      pipeline.slice(0, 1),
      '--prefix',
      prefix,
      '--api',
      apiUrl,
      '--key',
      KEY,
      '--db',
      databaseUrl,
      ...(values['redis-url'] ? ['--redis', values['redis-url']] : []),
      '--jobs',
      String(count),
      '--concurrency',
      values.concurrency!,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  child.stdout!.on('data', (d) => {
    out += d;
  });
  const [code] = await once(child, 'exit');
  clearInterval(sampler);
  const cpuAfter = { api: processCpuMs(api.child.pid!), redis: await redisCpuMs(redis), pg: postgresCpuMs() };
  await queue.obliterate({ force: true }).catch(() => {});
  await queue.close();
  redis.disconnect();
  if (code !== 0) throw new Error(`pipeline ${pipeline} failed (exit ${code})`);
  const result = JSON.parse(out.trim().split('\n').at(-1)!) as Result;
  const per = (ms: number) => round(ms / result.jobs, 3);
  return {
    ...result,
    pipeline,
    redisPeakMB: redisPeak / 1048576,
    cpuMsPerSubscriber: {
      worker: per(result.workerCpuMs ?? 0),
      api: per(cpuAfter.api - cpuBefore.api),
      redis: per(cpuAfter.redis - cpuBefore.redis),
      postgres: per(cpuAfter.pg - cpuBefore.pg),
    },
  };
}

/** cards-sync alone at each size, on a fresh database: subscribers/s and CPU per subscriber. */
async function curve(mock: { url: string; child: ChildProcess }, sizes: number[]) {
  const points: {
    subscribers: number;
    subscribersPerSec: number;
    steadySubscribersPerSec: number;
    cpuMsPerSubscriber: number;
    workerCpuMs: number;
    postgresCpuMs: number;
  }[] = [];
  for (const size of sizes) {
    await resetDatabase(databaseUrl);
    const r = await runPipeline('c-cards-sync', mock, size);
    const cpu = r.cpuMsPerSubscriber!;
    points.push({
      subscribers: size,
      subscribersPerSec: round(r.subscribersPerSec),
      steadySubscribersPerSec: round(r.steadySubscribersPerSec),
      cpuMsPerSubscriber: round(cpu.worker + cpu.api + cpu.redis + cpu.postgres, 3),
      workerCpuMs: cpu.worker,
      postgresCpuMs: cpu.postgres,
    });
    console.log(`  ${String(size).padStart(7)} subscribers: ${round(r.subscribersPerSec)} subscribers/s`);
  }
  console.log(
    '\nsubscribers  subs/s  second half subs/s  wall ms/1000 subs (second half)  CPU ms/subscriber: all parts  worker  Postgres',
  );
  for (const p of points) {
    console.log(
      `${String(p.subscribers).padStart(11)} ${String(p.subscribersPerSec).padStart(7)} ${String(p.steadySubscribersPerSec).padStart(19)} ` +
        `${String(round(1e6 / p.steadySubscribersPerSec)).padStart(32)} ` +
        `${String(p.cpuMsPerSubscriber).padStart(29)} ${String(p.workerCpuMs).padStart(7)} ${String(p.postgresCpuMs).padStart(9)}`,
    );
  }
  writeFileSync(
    values.chart!,
    lineChart(
      `cards-sync, ${k} cards a subscriber: cost per subscriber by run size`,
      points.map((p) => p.subscribers.toLocaleString('en')),
      'ms per subscriber',
      [
        {
          name: 'wall time, whole run',
          color: '#1f77b4',
          values: points.map((p) => 1000 / p.subscribersPerSec),
        },
        {
          name: 'wall time, 2nd half',
          color: '#ff7f0e',
          values: points.map((p) => 1000 / p.steadySubscribersPerSec),
        },
        { name: 'CPU, all parts', color: '#d62728', values: points.map((p) => p.cpuMsPerSubscriber) },
        { name: 'CPU, worker', color: '#2ca02c', values: points.map((p) => p.workerCpuMs) },
        { name: 'CPU, Postgres', color: '#9467bd', values: points.map((p) => p.postgresCpuMs) },
      ],
    ),
  );
  console.log(`chart written to ${values.chart}`);
  const perSub = points.map((p) => 1 / p.steadySubscribersPerSec);
  console.log(
    JSON.stringify({
      curve: points,
      cardsPerSubscriber: k,
      // Largest over smallest steady (second-half) wall time per subscriber: 1 is perfectly flat.
      wall_cost_spread: round(Math.max(...perSub) / Math.min(...perSub), 3),
    }),
  );
}

async function main() {
  const mock = await startMockApi(KEY, k);
  if (values.curve !== undefined) {
    const sizes = (values.curve || '5000,10000,20000,40000,80000').split(',').map(Number);
    console.log(
      `cards-sync scaling curve: ${sizes.join(', ')} subscribers x ${k} cards, concurrency ${values.concurrency}`,
    );
    try {
      await curve(mock, sizes);
    } finally {
      mock.child.kill('SIGTERM');
    }
    return;
  }
  console.log(
    `cards-sync benchmark: ${n} subscribers x ${k} cards, concurrency ${values.concurrency}, mock API ${mock.url}`,
  );
  const results: (Result & { round: number })[] = [];
  try {
    const only = values.only?.split(',');
    for (let pass = 1; pass <= rounds; pass++) {
      if (rounds > 1) console.log(`  round ${pass} of ${rounds}`);
      for (const [name, fresh] of [
        ['a-ceiling', true],
        ['b-naive', true],
        ['c-cards-sync', true],
        ['c-cards-sync-unchanged', false],
        ['f-floor', true],
      ] as const) {
        if (only && !only.includes(name.slice(0, 1))) continue;
        // b is six to eight times slower than c and far from its target: measured once.
        if (name === 'b-naive' && pass > 1) continue;
        if (fresh) await resetDatabase(databaseUrl);
        const r = await runPipeline(name, mock);
        results.push({ ...r, round: pass });
        console.log(`  ${name.padEnd(24)} ${round(r.subscribersPerSec)} subscribers/s`);
      }
    }
  } finally {
    mock.child.kill('SIGTERM');
  }
  console.log(
    '\npipeline                  round   subs/s   cards/s   p50 ms  p99 ms  peak RSS MB  Redis peak MB   CPU ms/subscriber: worker  API  Redis  Postgres',
  );
  for (const r of results) {
    console.log(
      `${r.pipeline.padEnd(24)} ${String(r.round).padStart(6)} ${String(round(r.subscribersPerSec)).padStart(8)} ${String(round(r.cardsPerSec)).padStart(9)} ` +
        `${String(r.p50Ms).padStart(8)} ${String(r.p99Ms).padStart(7)} ${String(round(r.peakRssMB, 1)).padStart(12)} ${String(round(r.redisPeakMB ?? 0, 1)).padStart(14)}` +
        `   ${[r.cpuMsPerSubscriber?.worker, r.cpuMsPerSubscriber?.api, r.cpuMsPerSubscriber?.redis, r.cpuMsPerSubscriber?.postgres].map((x) => String(x ?? '').padStart(6)).join(' ')}`,
    );
  }
  const ratio = (x: number | undefined, y: number | undefined) =>
    x === undefined || y === undefined ? null : round(x / y, 3);
  const perRound = Array.from({ length: rounds }, (_, i) => {
    const by = (name: string) =>
      results.find((r) => r.pipeline === name && r.round === i + 1)?.subscribersPerSec;
    // b was measured in the first round only; later rounds compare c with it too.
    const b = results.find((r) => r.pipeline === 'b-naive')?.subscribersPerSec;
    const [a, c, c2, f] = ['a-ceiling', 'c-cards-sync', 'c-cards-sync-unchanged', 'f-floor'].map(by);
    return {
      round: i + 1,
      c_over_a: ratio(c, a),
      c_over_b: ratio(c, b),
      unchanged_over_first: ratio(c2, c),
      f_over_a: ratio(f, a),
    };
  });
  const median = (key: Exclude<keyof (typeof perRound)[number], 'round'>) => {
    const xs = perRound.flatMap((r) => (r[key] === null ? [] : [r[key]])).sort((x, y) => x - y);
    if (xs.length === 0) return null;
    const mid = Math.floor(xs.length / 2);
    return xs.length % 2 === 1 ? xs[mid]! : round((xs[mid - 1]! + xs[mid]!) / 2, 3);
  };
  if (rounds > 1) {
    console.log('\nround  c_over_a  c_over_b  unchanged_over_first  f_over_a');
    for (const r of perRound) {
      console.log(
        `${String(r.round).padStart(5)} ${[r.c_over_a, r.c_over_b, r.unchanged_over_first, r.f_over_a]
          .map((x, j) => String(x ?? '').padStart([9, 9, 21, 9][j]!))
          .join(' ')}`,
      );
    }
  }
  console.log(
    JSON.stringify({
      subscribers: n,
      cardsPerSubscriber: k,
      rounds,
      results,
      perRound,
      // Medians over the rounds.
      c_over_a: median('c_over_a'),
      c_over_b: median('c_over_b'),
      unchanged_over_first: median('unchanged_over_first'),
      // The best any sync that stores the cards in Postgres reaches here, against the ceiling.
      f_over_a: median('f_over_a'),
    }),
  );
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
