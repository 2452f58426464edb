import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { Queue } from 'bullmq';
import { createSyncQueue, enqueueSyncs, JOB_NAME, QUEUE_NAME } from '../jobs/queue.js';
import { createRedis } from '../jobs/redis.js';
import { lineChart } from './chart.js';
import { postgresCpuMs, processCpuMs, redisCpuMs } from './cpu.js';
import {
  BENCH_CARD_TOKEN_KEYS,
  benchRedis,
  parseFlags,
  resetDatabase,
  startRawApi,
  wholeNumber,
} from './harness.js';
import type { PipelineResult } from './pipeline-result.js';
import {
  holdWal,
  markBefore,
  readsPerSync,
  rowsPerSync,
  seqTuplesPerSync,
  settle,
  tableCounts,
  walByRelation,
  walBytes,
  walPosition,
  walSplit,
} from './wal.js';

// npm run bench [-- --subscribers 20000 --cards 5 --concurrency 64]
//   The pipelines (r, the raw ceiling; a, b, c, c unchanged; f, the floor) over the same data, in
//   one run on one machine, all against one API process (bench/raw-api.ts); the ratios are what
//   counts. Nothing else may write to the Postgres server during a run: WAL is counted cluster-wide.
// npm run bench -- --curve [5000,10000,20000,40000,80000] [--chart bench/curve.svg]
//   cards-sync alone at growing sizes: is the cost per subscriber flat?

const { values } = parseFlags({
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
     * Rounds of the pipelines, one after another (r, a, c, c unchanged, f; b in the first only): the
     * ratios are taken within each round and their median is reported, so that a drift of the
     * shared machine's speed during one pipeline does not decide the verdict.
     */
    rounds: { type: 'string', default: '3' },
    /**
     * Enqueue every pipeline's jobs as r's are (a plain addBulk, BullMQ's default job options), to
     * tell what the product's job options cost from what its fetch path costs.
     */
    'plain-jobs': { type: 'boolean', default: false },
    /** Comma-separated subset of pipelines to run (r,a,b,c,f), for profiling one of them. */
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

type Rows = Record<string, { ins: number; upd: number; hot: number; del: number }>;

interface Result extends PipelineResult {
  redisPeakMB?: number;
  /** CPU ms per subscriber spent by each part: the worker, the API, Redis and Postgres. */
  cpuMsPerSubscriber?: { worker: number; api: number; redis: number; postgres: number };
  /** WAL bytes per sync, the whole cluster's (pg_current_wal_lsn before and after). */
  walBytesPerSync: number;
  /** Of the WAL records, those of the bench database, and the full-page images among them (pg_walinspect). */
  walBenchDbBytesPerSync: number | null;
  walFpiBytesPerSync: number | null;
  /** Record bytes per sync written by anything else meanwhile: 0 when the run had the server alone. */
  walOtherBytesPerSync: number | null;
  /** The bench database's WAL bytes per sync by relation (or record kind), full-page images apart. */
  walByRelationPerSync: Record<string, { bytes: number; fpi: number }> | null;
  /** Rows inserted, updated (of which HOT) and deleted per sync, by table. */
  rowsPerSync: Rows;
  /** Tuples read by sequential scans per sync, by table: 0 everywhere when every lookup takes an index. */
  seqTuplesReadPerSync: Record<string, number>;
  /** Tuples of saved_cards read per sync (seq_tup_read + idx_tup_fetch). */
  savedCardsReadPerSync: number;
  /** Scans of saved_cards started per sync: sequential, by index. */
  savedCardsScansPerSync: { seq: number; idx: number };
}

async function runPipeline(
  pipeline: string,
  api: { url: string; child: ChildProcess },
  count = n,
): Promise<Result> {
  const apiUrl = api.url;
  const prefix = bench.tag(`bench-${pipeline}-${Date.now().toString(36)}`);
  const redis = createRedis(bench.target, { blocking: true });
  const raw = pipeline.startsWith('r');
  // r's jobs: a plain addBulk, BullMQ's default job options. The others: the product's enqueue.
  const plain = raw || values['plain-jobs'];
  const queue = plain
    ? new Queue(QUEUE_NAME, { connection: redis, prefix })
    : createSyncQueue(redis, { prefix });
  for (let i = 0; i < count; i += 1000) {
    const ids = Array.from({ length: Math.min(1000, count - i) }, (_, j) => 1 + i + j);
    const targets = ids.map((subscriberId) => ({ subscriberId }));
    if (plain) {
      await queue.addBulk(targets.map((target) => ({ name: JOB_NAME, data: { target, trigger: 'manual' } })));
    } else {
      await enqueueSyncs(queue as ReturnType<typeof createSyncQueue>, targets, 'manual');
    }
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
  // Counters of the migration or of the pipeline before are flushed once their backends are gone.
  await settle(databaseUrl);
  const releaseWal = await holdWal(databaseUrl);
  const pgBefore = await markBefore(databaseUrl);
  const cpuBefore = {
    api: processCpuMs(api.child.pid!),
    redis: await redisCpuMs(redis),
    pg: postgresCpuMs(),
  };
  const common = ['--prefix', prefix, '--api', apiUrl, '--key', KEY, '--jobs', String(count)];
  const child = spawn(
    process.execPath,
    [
      ...(values['cpu-prof'] ? ['--cpu-prof', '--cpu-prof-dir', values['cpu-prof']] : []),
      ...(raw
        ? [`${here}raw-worker.js`, ...common, '--queue', QUEUE_NAME]
        : [
            `${here}pipeline-worker.js`,
            ...common,
            '--pipeline',
            pipeline.slice(0, 1),
            '--db',
            databaseUrl,
            ...(values['redis-url'] ? ['--redis', values['redis-url']] : []),
          ]),
      '--concurrency',
      values.concurrency!,
    ],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: {
        ...process.env,
        BENCH_REDIS_TARGET: JSON.stringify(bench.target),
        // c unchanged must read the tokens c sealed: one key ring for every pipeline of the run.
        BENCH_CARD_TOKEN_KEYS,
      },
    },
  );
  let out = '';
  child.stdout!.on('data', (d) => {
    out += d;
  });
  const [code] = await once(child, 'exit');
  clearInterval(sampler);
  const endLsn = await walPosition(databaseUrl);
  // Postgres's CPU too is read once the worker's backends have exited (and been counted).
  if (!(await settle(databaseUrl))) console.error(`  (${pipeline}: backends of the bench database linger)`);
  const cpuAfter = { api: processCpuMs(api.child.pid!), redis: await redisCpuMs(redis), pg: postgresCpuMs() };
  const tablesAfter = await tableCounts(databaseUrl);
  await queue.obliterate({ force: true }).catch(() => {});
  await queue.close();
  redis.disconnect();
  if (code !== 0) throw new Error(`pipeline ${pipeline} failed (exit ${code})`);
  const result = JSON.parse(out.trim().split('\n').at(-1)!) as PipelineResult;
  if (result.failed > 0) console.error(`  (${pipeline}: ${result.failed} of ${result.jobs} jobs failed)`);
  const per = (ms: number) => round(ms / result.jobs, 3);
  const scanned = Object.entries(seqTuplesPerSync(pgBefore.tables, tablesAfter, result.jobs)).filter(
    ([, n]) => n >= 1,
  );
  if (scanned.length > 0) {
    console.error(
      `  (${pipeline}: sequential scans read ${scanned.map(([t, n]) => `${n} ${t} rows`).join(', ')} per sync)`,
    );
  }
  const wal = await walBytes(databaseUrl, pgBefore.lsn, endLsn);
  const split = pgBefore.walinspect ? await walSplit(databaseUrl, pgBefore.lsn, endLsn) : null;
  const byRelation = pgBefore.walinspect ? await walByRelation(databaseUrl, pgBefore.lsn, endLsn) : null;
  await releaseWal();
  const reads = readsPerSync(pgBefore.tables, tablesAfter, 'saved_cards', result.jobs);
  return {
    ...result,
    pipeline,
    walBytesPerSync: per(wal),
    walBenchDbBytesPerSync: split && per(split.benchDbBytes),
    walFpiBytesPerSync: split && per(split.benchDbFpiBytes),
    walOtherBytesPerSync: split && per(split.otherBytes),
    walByRelationPerSync:
      byRelation &&
      Object.fromEntries(
        byRelation
          .filter((r) => r.bytes / result.jobs >= 1)
          .map((r) => [
            r.what,
            { bytes: round(r.bytes / result.jobs, 1), fpi: round(r.fpiBytes / result.jobs, 1) },
          ]),
      ),
    rowsPerSync: rowsPerSync(pgBefore.tables, tablesAfter, result.jobs),
    seqTuplesReadPerSync: seqTuplesPerSync(pgBefore.tables, tablesAfter, result.jobs),
    savedCardsReadPerSync: reads.tuples,
    savedCardsScansPerSync: { seq: reads.seqScans, idx: reads.idxScans },
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
async function curve(api: { url: string; child: ChildProcess }, sizes: number[]) {
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
    const r = await runPipeline('c-cards-sync', api, size);
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

/** The median of the numbers among `xs`; null if there are none. */
function median(xs: readonly (number | null | undefined)[]): number | null {
  const ys = xs.filter((x): x is number => typeof x === 'number').sort((x, y) => x - y);
  if (ys.length === 0) return null;
  const mid = Math.floor(ys.length / 2);
  return ys.length % 2 === 1 ? ys[mid]! : round((ys[mid - 1]! + ys[mid]!) / 2, 3);
}

/** Rows per sync of several rounds of one pipeline, each figure the median over the rounds. */
function medianRows(of: readonly Result[]): Rows {
  const out: Rows = {};
  const tables = [...new Set(of.flatMap((r) => Object.keys(r.rowsPerSync)))].sort();
  for (const t of tables) {
    const m = (f: 'ins' | 'upd' | 'hot' | 'del') => median(of.map((r) => r.rowsPerSync[t]?.[f] ?? 0)) ?? 0;
    out[t] = { ins: m('ins'), upd: m('upd'), hot: m('hot'), del: m('del') };
  }
  return out;
}

const PIPELINES = [
  // [name, fresh database]; r first in every round: the ceiling every other pipeline is held to.
  ['r-raw', true],
  ['a-ceiling', true],
  ['b-naive', true],
  ['c-cards-sync', true],
  ['c-cards-sync-unchanged', false],
  ['f-floor', true],
] as const;

const RATIOS = [
  'a_over_r',
  'c_over_r',
  'unchanged_over_r',
  'f_over_r',
  'c_over_a',
  'c_over_b',
  'unchanged_over_first',
  'f_over_a',
] as const;

async function main() {
  const sizes =
    values.curve === undefined ? [] : (values.curve || '5000,10000,20000,40000,80000').split(',').map(Number);
  const api = await startRawApi(KEY, k, Math.max(n, ...sizes));
  if (values.curve !== undefined) {
    console.log(
      `cards-sync scaling curve: ${sizes.join(', ')} subscribers x ${k} cards, concurrency ${values.concurrency}`,
    );
    try {
      await curve(api, sizes);
    } finally {
      api.child.kill('SIGTERM');
    }
    return;
  }
  console.log(
    `cards-sync benchmark: ${n} subscribers x ${k} cards, concurrency ${values.concurrency}, API ${api.url}`,
  );
  const results: (Result & { round: number })[] = [];
  try {
    const only = values.only?.split(',');
    for (let pass = 1; pass <= rounds; pass++) {
      if (rounds > 1) console.log(`  round ${pass} of ${rounds}`);
      for (const [name, fresh] of PIPELINES) {
        if (only && !only.includes(name.slice(0, 1))) continue;
        // b is six to eight times slower than c and far from its target: measured once.
        if (name === 'b-naive' && pass > 1) continue;
        if (fresh) await resetDatabase(databaseUrl);
        const r = await runPipeline(name, api);
        results.push({ ...r, round: pass });
        console.log(`  ${name.padEnd(24)} ${round(r.subscribersPerSec)} subscribers/s`);
      }
    }
  } finally {
    api.child.kill('SIGTERM');
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
  console.log(
    '\npipeline                  round  WAL B/sync  bench db B/sync  of which FPI  other B/sync  saved_cards read/sync (seq, idx scans)  rows/sync: ins/upd/hot/del by table',
  );
  for (const r of results) {
    const rows = Object.entries(r.rowsPerSync)
      .map(([t, x]) => `${t} ${x.ins}/${x.upd}/${x.hot}/${x.del}`)
      .join(', ');
    console.log(
      `${r.pipeline.padEnd(24)} ${String(r.round).padStart(6)} ${String(round(r.walBytesPerSync)).padStart(11)} ` +
        `${String(r.walBenchDbBytesPerSync === null ? '' : round(r.walBenchDbBytesPerSync)).padStart(16)} ` +
        `${String(r.walFpiBytesPerSync === null ? '' : round(r.walFpiBytesPerSync)).padStart(13)} ` +
        `${String(r.walOtherBytesPerSync === null ? '' : round(r.walOtherBytesPerSync)).padStart(13)} ` +
        `${`${r.savedCardsReadPerSync} (${r.savedCardsScansPerSync.seq}, ${r.savedCardsScansPerSync.idx})`.padStart(39)}  ${rows}`,
    );
  }
  // Where each sync's WAL goes, for cards-sync's pipelines in the first round.
  for (const r of results.filter(
    (x) => x.round === 1 && x.pipeline.startsWith('c') && x.walByRelationPerSync,
  )) {
    console.log(`\nWAL per sync by relation, ${r.pipeline} (bytes, of which full-page images):`);
    for (const [what, b] of Object.entries(r.walByRelationPerSync!)) {
      console.log(`  ${what.padEnd(40)} ${String(b.bytes).padStart(8)} ${String(b.fpi).padStart(8)}`);
    }
  }
  const ratio = (x: number | undefined, y: number | undefined) =>
    x === undefined || y === undefined ? null : round(x / y, 3);
  const perRound = Array.from({ length: rounds }, (_, i) => {
    const by = (name: string) =>
      results.find((r) => r.pipeline === name && r.round === i + 1)?.subscribersPerSec;
    // b was measured in the first round only; later rounds compare c with it too.
    const b = results.find((r) => r.pipeline === 'b-naive')?.subscribersPerSec;
    const [r, a, c, c2, f] = ['r-raw', 'a-ceiling', 'c-cards-sync', 'c-cards-sync-unchanged', 'f-floor'].map(
      by,
    );
    return {
      round: i + 1,
      a_over_r: ratio(a, r),
      c_over_r: ratio(c, r),
      unchanged_over_r: ratio(c2, r),
      f_over_r: ratio(f, r),
      c_over_a: ratio(c, a),
      c_over_b: ratio(c, b),
      unchanged_over_first: ratio(c2, c),
      f_over_a: ratio(f, a),
    };
  });
  const medians = Object.fromEntries(
    RATIOS.map((key) => [key, median(perRound.map((r) => r[key]))]),
  ) as Record<(typeof RATIOS)[number], number | null>;
  console.log(`\nround ${RATIOS.map((key) => key.padStart(Math.max(9, key.length))).join(' ')}`);
  for (const r of [...perRound, { round: 'median', ...medians }]) {
    console.log(
      `${String(r.round).padStart(5)} ${RATIOS.map((key) => String(r[key] ?? '').padStart(Math.max(9, key.length))).join(' ')}`,
    );
  }
  const of = (name: string) => results.filter((r) => r.pipeline === name);
  const first = of('c-cards-sync');
  const unchanged = of('c-cards-sync-unchanged');
  console.log(
    JSON.stringify({
      subscribers: n,
      cardsPerSubscriber: k,
      rounds,
      results,
      perRound,
      // Medians over the rounds. r is the raw ceiling: a bare BullMQ worker fetching with undici.
      ...medians,
      // WAL per sync, the cluster's (LSN difference) and the bench database's images among it.
      walBytesPerFirstSync: median(first.map((r) => r.walBytesPerSync)),
      walBytesPerUnchangedSync: median(unchanged.map((r) => r.walBytesPerSync)),
      // The same from the bench database's own records (pg_walinspect): what to read when anything
      // else wrote to the server meanwhile (walOtherBytesPerSync of each result above 0).
      walBenchDbBytesPerFirstSync: median(first.map((r) => r.walBenchDbBytesPerSync)),
      walBenchDbBytesPerUnchangedSync: median(unchanged.map((r) => r.walBenchDbBytesPerSync)),
      walFpiBytesPerFirstSync: median(first.map((r) => r.walFpiBytesPerSync)),
      walFpiBytesPerUnchangedSync: median(unchanged.map((r) => r.walFpiBytesPerSync)),
      rowsPerFirstSync: medianRows(first),
      rowsPerUnchangedSync: medianRows(unchanged),
      savedCardTuplesReadPerUnchangedSync: median(unchanged.map((r) => r.savedCardsReadPerSync)),
      peakRssMB: round(Math.max(...results.map((r) => r.peakRssMB)), 1),
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
