import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import pg from 'pg';
import { createRedis } from '../jobs/redis.js';
import { createSyncQueue, enqueueSyncs } from '../jobs/sync/queue.js';
import {
  BENCH_CARD_TOKEN_KEYS,
  benchRedis,
  CLI,
  databaseFlag,
  parseFlags,
  REDIS_FLAG,
  resetDatabase,
  startRawApi,
  wholeNumber,
} from './harness.js';
import { startOtlpSink } from './otlp-sink.js';

const MAIN_THREAD_CPU = new URL('./main-thread-cpu.js', import.meta.url).href;

// npm run bench:tracing [-- --subscribers 10000 --rounds 3 --concurrency 64]
//   The real worker (`cards-sync worker --exit-when-idle`) over the same jobs with tracing off, on
//   at 10% sampling and on at 100%, exporting OTLP/HTTP (protobuf, the default) to a local sink;
//   the three interleaved in each round, a fresh database for every run. Throughput is syncs over
//   the time from the first sync's start to the last one's end (sync_runs); CPU per sync is the
//   worker process's user + system time (/usr/bin/time) less that of a run over no jobs (start-up
//   and shut-down, reported apart), over the syncs; it is also split into the main thread's (the
//   JavaScript: bench/main-thread-cpu.ts reads it at exit) and the rest (V8's garbage collection
//   and compilation threads, libuv's pool).

const { values } = parseFlags({
  options: {
    subscribers: { type: 'string', default: '10000' },
    cards: { type: 'string', default: '5' },
    concurrency: { type: 'string', default: '64' },
    rounds: { type: 'string', default: '3' },
    ...databaseFlag('cards_sync_bench_tracing'),
    ...REDIS_FLAG,
    /** The built `bin/cards-sync.js` of another revision (e.g. a copy of main), run as mode `baseline`. */
    baseline: { type: 'string' },
    /** Also run tracing on with no trace sampled (`on 0%`). */
    'with-zero': { type: 'boolean', default: false },
    /** More standard variables for the modes with tracing on, `K=V[,K=V]` (e.g. OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT=256). */
    'otel-env': { type: 'string' },
    /** Write a V8 CPU profile of each worker that syncs into DIR/<mode>/ (bench/profile-diff.ts reads them). */
    'cpu-prof': { type: 'string' },
  },
});
const n = wholeNumber('subscribers', values.subscribers, 100);
const rounds = wholeNumber('rounds', values.rounds, 1);
const cards = wholeNumber('cards', values.cards, 0);
const concurrency = wholeNumber('concurrency', values.concurrency, 1);
const databaseUrl = values['database-url']!;
const bench = benchRedis(values['redis-url']);
const KEY = 'bench-key-0d9c2f1e';

/**
 * `baseline`: another build's CLI (`--baseline`, e.g. main's), tracing off: what "off" must equal.
 * `on 0%`: tracing on, no trace kept: the cost of being ready to trace (context propagation, the
 * instrumentations' hooks) without a span exported.
 */
type Mode = 'baseline' | 'off' | 'on 0%' | 'on 10%' | 'on 100%';
const RATIO: Partial<Record<Mode, string>> = { 'on 0%': '0', 'on 10%': '0.1', 'on 100%': '1.0' };
const MODES: Mode[] = [
  ...(values.baseline ? (['baseline'] as const) : []),
  'off',
  ...(values['with-zero'] ? (['on 0%'] as const) : []),
  'on 10%',
  'on 100%',
];

const otelExtra = Object.fromEntries(
  (values['otel-env'] ?? '')
    .split(',')
    .filter(Boolean)
    .map((kv) => {
      const m = /^(OTEL_[A-Z_]+)=(.*)$/.exec(kv);
      if (!m) throw new Error(`--otel-env: ${kv} is not OTEL_NAME=VALUE`);
      return [m[1]!, m[2]!] as const;
    }),
);

function tracingEnv(mode: Mode, endpoint: string): Record<string, string> {
  const ratio = RATIO[mode];
  if (ratio === undefined) return {};
  return {
    OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
    OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
    OTEL_TRACES_SAMPLER_ARG: ratio,
    ...otelExtra,
  };
}

async function syncWindow(): Promise<{ syncs: number; seconds: number }> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  const r = await client.query<{ syncs: number; seconds: number }>(
    `select count(*)::int as syncs,
            extract(epoch from max(finished_at) - min(started_at))::float8 as seconds
       from sync_runs`,
  );
  await client.end();
  return r.rows[0]!;
}

/**
 * The worker's user + system CPU seconds over `count` jobs (0: start-up and shut-down alone):
 * `total`, start to exit (/usr/bin/time); `main` and `others`, its main thread's and the other
 * threads', as the process read them at exit.
 */
async function worker(
  mode: Mode,
  apiUrl: string,
  sinkUrl: string,
  count: number,
): Promise<{ total: number; main: number; others: number }> {
  const prefix = bench.tag(`bench-tracing-${Date.now().toString(36)}`);
  const redis = createRedis(bench.target, { blocking: true });
  const queue = createSyncQueue(redis, { prefix });
  for (let i = 0; i < count; i += 1000) {
    const ids = Array.from({ length: Math.min(1000, n - i) }, (_, j) => 1 + i + j);
    // The bulk lane: each job its own trace (as a refresh's are), sampled on its own.
    await enqueueSyncs(
      queue,
      ids.map((subscriberId) => ({ subscriberId })),
      'manual',
      { lane: 'bulk' },
    );
  }
  const dir = mkdtempSync(join(tmpdir(), 'bench-tracing-'));
  const timeFile = join(dir, 'time');
  const mainFile = join(dir, 'main');
  const child = spawn(
    '/usr/bin/time',
    [
      '-f',
      '%U %S',
      '-o',
      timeFile,
      process.execPath,
      '--import',
      MAIN_THREAD_CPU,
      ...(values['cpu-prof'] && count > 0
        ? ['--cpu-prof', `--cpu-prof-dir=${join(values['cpu-prof'], mode.replace(/\W+/g, ''))}`]
        : []),
      mode === 'baseline' ? values.baseline! : CLI,
      'worker',
      '--exit-when-idle',
    ],
    {
      stdio: ['ignore', 'ignore', 'inherit'],
      env: {
        PATH: process.env.PATH ?? '',
        DATABASE_URL: databaseUrl,
        ...bench.env,
        QUEUE_PREFIX: prefix,
        CARDS_API_BASE_URL: apiUrl,
        CARDS_API_KEY: KEY,
        CARD_TOKEN_KEYS: BENCH_CARD_TOKEN_KEYS,
        SYNC_CONCURRENCY: String(concurrency),
        LOG_LEVEL: 'warn',
        BENCH_MAIN_THREAD_CPU_FILE: mainFile,
        ...tracingEnv(mode, sinkUrl),
      },
    },
  );
  const [code] = await once(child, 'exit');
  if (code !== 0) throw new Error(`the worker (${mode}) exited ${code}`);
  const [user, sys] = readFileSync(timeFile, 'utf8').trim().split('\n').at(-1)!.split(' ').map(Number);
  await queue.obliterate({ force: true }).catch(() => {});
  await queue.close();
  redis.disconnect();
  const atExit = JSON.parse(readFileSync(mainFile, 'utf8')) as { main: number; total: number };
  return { total: (user ?? 0) + (sys ?? 0), main: atExit.main, others: atExit.total - atExit.main };
}

async function run(mode: Mode, apiUrl: string, sinkUrl: string) {
  // The baseline's own schema: an older release refuses a database with a breaking migration it lacks.
  await resetDatabase(
    databaseUrl,
    mode === 'baseline' ? join(dirname(dirname(values.baseline!)), 'db', 'migrations') : undefined,
  );
  // Loading the SDK is paid once per process, not per sync: measured alone and taken off.
  const startup = await worker(mode, apiUrl, sinkUrl, 0);
  const cpu = await worker(mode, apiUrl, sinkUrl, n);
  const window = await syncWindow();
  const perSync = (seconds: number) => Math.round((seconds * 1000 * 1000) / window.syncs) / 1000;
  return {
    mode,
    syncs: window.syncs,
    syncsPerSec: Math.round(window.syncs / window.seconds),
    cpuMsPerSync: perSync(cpu.total - startup.total),
    mainThreadCpuMsPerSync: perSync(cpu.main - startup.main),
    otherThreadsCpuMsPerSync: perSync(cpu.others - startup.others),
    startupCpuMs: Math.round(startup.total * 1000),
  };
}

const api = await startRawApi(KEY, cards, n);
const sink = await startOtlpSink();
const results: Awaited<ReturnType<typeof run>>[][] = [];
try {
  for (let r = 0; r < rounds; r++) {
    const round: Awaited<ReturnType<typeof run>>[] = [];
    // Each round starts with a different mode, so that no mode always runs first.
    for (let i = 0; i < MODES.length; i++) {
      const result = await run(MODES[(i + r) % MODES.length]!, api.url, sink.url);
      console.error(
        `  round ${r + 1} ${result.mode}: ${result.syncsPerSec} syncs/s, ${result.cpuMsPerSync} CPU ms/sync` +
          ` (main thread ${result.mainThreadCpuMsPerSync}, other threads ${result.otherThreadsCpuMsPerSync})`,
      );
      round.push(result);
    }
    results.push(round);
  }
} finally {
  api.child.kill();
  await sink.stop();
}
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const of = (round: (typeof results)[number], mode: Mode) => round.find((x) => x.mode === mode)!;
const summary = Object.fromEntries(
  MODES.map((mode) => [
    mode,
    {
      syncsPerSec: median(results.map((r) => of(r, mode).syncsPerSec)),
      cpuMsPerSync: median(results.map((r) => of(r, mode).cpuMsPerSync)),
      // Within each round, against that round's "off": the machine's drift between rounds cancels.
      throughputVsOff: median(results.map((r) => of(r, mode).syncsPerSec / of(r, 'off').syncsPerSec)),
      cpuVsOff: median(results.map((r) => of(r, mode).cpuMsPerSync / of(r, 'off').cpuMsPerSync)),
      mainThreadCpuMsPerSync: median(results.map((r) => of(r, mode).mainThreadCpuMsPerSync)),
      mainThreadCpuVsOff: median(
        results.map((r) => of(r, mode).mainThreadCpuMsPerSync / of(r, 'off').mainThreadCpuMsPerSync),
      ),
      otherThreadsCpuMsPerSync: median(results.map((r) => of(r, mode).otherThreadsCpuMsPerSync)),
      startupCpuMs: median(results.map((r) => of(r, mode).startupCpuMs)),
    },
  ]),
);
console.log(
  JSON.stringify(
    { subscribers: n, cards, concurrency, rounds, exported: sink.counts(), summary, results },
    null,
    1,
  ),
);
