import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { Queue } from 'bullmq';
import { createRedis } from '../jobs/redis.js';
import { createSyncQueue, enqueueSyncs, JOB_NAME, QUEUE_NAME } from '../jobs/sync/queue.js';
import { postgresCpuMs, processCpuMs, redisCpuMs } from './cpu.js';
import { BENCH_CARD_TOKEN_KEYS } from './harness.js';
import type { PipelineResult } from './pipeline-result.js';
import { round } from './run-figures.js';
import type { RunFlags } from './run-flags.js';
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

// One pipeline of bench/run.ts measured: its jobs enqueued, its worker process run, and what the run cost.

/** The key the benchmark's API asks for, and every pipeline's worker presents. */
export const KEY = 'bench-key-0d9c2f1e';
const here = new URL('.', import.meta.url).pathname;

export type Rows = Record<string, { ins: number; upd: number; hot: number; del: number }>;

export interface Result extends PipelineResult {
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

/** Runs `pipeline` over `count` subscribers in a worker process of its own, against `api`. */
export async function runPipeline(
  flags: RunFlags,
  pipeline: string,
  api: { url: string; child: ChildProcess },
  count = flags.n,
): Promise<Result> {
  const { values, databaseUrl, bench } = flags;
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
      ...(raw ? [] : ['--import', `${here}drizzle-hook.js`]),
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
            '--change-events',
            values['change-events']!,
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
