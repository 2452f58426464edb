import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { runMigrations } from '../db/migrate.js';
import { createSyncQueue, enqueueSyncs } from '../jobs/queue.js';
import { createRedis } from '../jobs/redis.js';

// npm run bench [-- --subscribers 20000 --cards 5 --concurrency 16]
// Three pipelines over the same data, in one run on one machine; the ratios are what counts.

const { values } = parseArgs({
  options: {
    subscribers: { type: 'string', default: '20000' },
    cards: { type: 'string', default: '5' },
    concurrency: { type: 'string', default: '16' },
    'database-url': {
      type: 'string',
      default:
        process.env.BENCH_DATABASE_URL ?? 'postgres://postgres:postgres@127.0.0.1:5432/cards_sync_bench',
    },
    'redis-url': { type: 'string', default: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' },
  },
});
const n = Number(values.subscribers);
const k = Number(values.cards);
const databaseUrl = values['database-url']!;
const redisUrl = values['redis-url']!;
const KEY = 'bench-key-0d9c2f1e';
const here = new URL('.', import.meta.url).pathname;

async function resetDatabase() {
  const admin = new pg.Client({ connectionString: databaseUrl.replace(/\/[^/]+$/, '/postgres') });
  await admin.connect();
  await admin.query(`drop database if exists "${new URL(databaseUrl).pathname.slice(1)}" with (force)`);
  await admin.end();
  await runMigrations(databaseUrl);
}

async function startMockApi(): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(
    process.execPath,
    [
      `${here}../../bin/cards-sync.js`,
      'mock-api',
      '--port',
      '0',
      '--api-key',
      KEY,
      '--cards-per-subscriber',
      String(k),
    ],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let out = '';
  for await (const chunk of child.stdout!) {
    out += chunk;
    const m = /listening on (http:\/\/\S+)/.exec(out);
    if (m) return { url: m[1]!, child };
  }
  throw new Error('the mock API did not start');
}

interface Result {
  pipeline: string;
  jobs: number;
  seconds: number;
  subscribersPerSec: number;
  cardsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  peakRssMB: number;
  redisPeakMB?: number;
}

async function runPipeline(pipeline: string, apiUrl: string): Promise<Result> {
  const prefix = `bench-${pipeline}-${Date.now().toString(36)}`;
  const redis = createRedis(redisUrl, { blocking: true });
  const queue = createSyncQueue(redis, { prefix });
  for (let i = 0; i < n; i += 1000) {
    const ids = Array.from({ length: Math.min(1000, n - i) }, (_, j) => 1 + i + j);
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
  const child = spawn(
    process.execPath,
    [
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
      '--redis',
      redisUrl,
      '--jobs',
      String(n),
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
  await queue.obliterate({ force: true }).catch(() => {});
  await queue.close();
  redis.disconnect();
  if (code !== 0) throw new Error(`pipeline ${pipeline} failed (exit ${code})`);
  const result = JSON.parse(out.trim().split('\n').at(-1)!) as Result;
  return { ...result, pipeline, redisPeakMB: redisPeak / 1048576 };
}

const round = (x: number, d = 0) => Math.round(x * 10 ** d) / 10 ** d;

async function main() {
  const mock = await startMockApi();
  console.log(
    `cards-sync benchmark: ${n} subscribers x ${k} cards, concurrency ${values.concurrency}, mock API ${mock.url}`,
  );
  const results: Result[] = [];
  try {
    for (const [name, fresh] of [
      ['a-ceiling', true],
      ['b-naive', true],
      ['c-cards-sync', true],
      ['c-cards-sync-unchanged', false],
    ] as const) {
      if (fresh) await resetDatabase();
      const r = await runPipeline(name, mock.url);
      results.push(r);
      console.log(`  ${name.padEnd(24)} ${round(r.subscribersPerSec)} subscribers/s`);
    }
  } finally {
    mock.child.kill('SIGTERM');
  }
  console.log('\npipeline                  subs/s   cards/s   p50 ms  p99 ms  peak RSS MB  Redis peak MB');
  for (const r of results) {
    console.log(
      `${r.pipeline.padEnd(24)} ${String(round(r.subscribersPerSec)).padStart(7)} ${String(round(r.cardsPerSec)).padStart(9)} ` +
        `${String(r.p50Ms).padStart(8)} ${String(r.p99Ms).padStart(7)} ${String(round(r.peakRssMB, 1)).padStart(12)} ${String(round(r.redisPeakMB ?? 0, 1)).padStart(14)}`,
    );
  }
  const [a, b, c, c2] = results as [Result, Result, Result, Result];
  console.log(
    JSON.stringify({
      subscribers: n,
      cardsPerSubscriber: k,
      results,
      c_over_a: round(c.subscribersPerSec / a.subscribersPerSec, 3),
      c_over_b: round(c.subscribersPerSec / b.subscribersPerSec, 3),
      unchanged_over_first: round(c2.subscribersPerSec / c.subscribersPerSec, 3),
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
