import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMockApi } from '../src/mock-api/server.js';
import { benchRedis, CLI, cliEnv, parseFlags, resetDatabase, wholeNumber } from './harness.js';

// npm run bench:memory [-- --subscribers 20000 --repeats 2 --concurrency N]
//
// A worker's peak RSS and throughput as an operator starts it: `cards-sync enqueue --file` of every
// id, then `cards-sync worker --exit-when-idle` over their first syncs (5 cards each, from the
// in-process sandbox), at the default concurrency unless `--concurrency` says otherwise. Side by
// side in the same run: `node bin/cards-sync.js worker` (the entry point, which starts the worker
// with its heap sizes: bin/cards-sync.js) and `node dist/src/cli/main.js worker` (the same program
// on Node 24's own heap sizing). Peak RSS is the kernel's (`/usr/bin/time -f %M`); syncs a second
// is the subscribers over the worker's wall time, start-up included.

const KEY = 'bench-memory-key';
const { values } = parseFlags({
  options: {
    subscribers: { type: 'string', default: '20000' },
    repeats: { type: 'string', default: '2' },
    concurrency: { type: 'string' },
    'redis-url': { type: 'string' },
  },
});
const n = wholeNumber('subscribers', values.subscribers, 100);
const repeats = wholeNumber('repeats', values.repeats, 1);
const baseUrl =
  process.env.BENCH_DATABASE_URL ?? 'postgres://postgres:postgres@127.0.0.1:5432/cards_sync_bench';
const databaseUrl = baseUrl.replace(/\/([^/]+)$/, '/$1_memory');
const redis = benchRedis(values['redis-url']);
const mock = createMockApi({ apiKey: KEY, recordRequests: false, cardsPerSubscriber: 5 });
await mock.start();
const dir = mkdtempSync(join(tmpdir(), 'cards-sync-memory-'));
const ids = join(dir, 'ids.txt');
writeFileSync(ids, `${Array.from({ length: n }, (_, i) => i + 1).join('\n')}\n`);
const entries = [
  ['bin/cards-sync.js (the entry point)', CLI],
  [
    "dist/src/cli/main.js (Node 24's own heap sizing)",
    // The product's build, as the image has it (the benchmarks' own copy is dist-bench/src).
    new URL('../../dist/src/cli/main.js', import.meta.url).pathname,
  ],
] as const;

/** Runs `node script args` with `env`; its exit code, and its peak RSS in KB through /usr/bin/time. */
async function run(
  script: string,
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number; rssKb: number }> {
  const out = join(dir, 'rss');
  const child = spawn('/usr/bin/time', ['-f', '%M', '-o', out, process.execPath, script, ...args], {
    env,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const [code] = (await once(child, 'exit')) as [number];
  return { code, rssKb: Number(readFileSync(out, 'utf8').trim().split('\n').at(-1)) };
}

console.log(`bench:memory: ${n} first syncs of 5 cards, concurrency ${values.concurrency ?? 'the default'}`);
const rows: string[] = [];
try {
  for (let r = 1; r <= repeats; r++) {
    for (const [label, script] of entries) {
      await resetDatabase(databaseUrl);
      const env: NodeJS.ProcessEnv = {
        ...cliEnv({
          redisEnv: redis.env,
          databaseUrl,
          apiUrl: mock.url,
          apiKey: KEY,
          prefix: redis.tag(`memory-${process.pid}-${r}-${rows.length}`),
        }),
        REFRESH_CRON: '0 0 1 1 *',
      };
      delete env.NODE_OPTIONS;
      if ((await run(CLI, ['enqueue', '--file', ids], env)).code !== 0) throw new Error('enqueue failed');
      const started = performance.now();
      const worker = await run(
        script,
        ['worker', '--exit-when-idle', ...(values.concurrency ? ['--concurrency', values.concurrency] : [])],
        env,
      );
      const seconds = (performance.now() - started) / 1000;
      if (worker.code !== 0) throw new Error(`${label}: the worker exited ${worker.code}`);
      const line = `| ${r} | ${label} | ${Math.round(worker.rssKb / 1024)} | ${Math.round(n / seconds)} |`;
      rows.push(line);
      console.log(line);
    }
  }
} finally {
  await mock.stop();
  rmSync(dir, { recursive: true, force: true });
}
console.log(
  ['', '| repeat | started as | peak RSS (MB) | syncs/s |', '|---:|---|---:|---:|', ...rows].join('\n'),
);
process.exit(0);
