import { parseArgs } from 'node:util';
import { type Job, Worker } from 'bullmq';
import { sql } from 'drizzle-orm';
import { createDb } from '../db/client.js';
import { savedCards } from '../db/schema.js';
import { createSyncQueue, QUEUE_NAME, type SyncJobData } from '../jobs/queue.js';
import { createRedis } from '../jobs/redis.js';
import { startSyncWorker } from '../jobs/worker.js';
import { createApiClient } from '../src/api/client.js';
import { createLogger } from '../src/logger.js';

// One pipeline of the benchmark, in its own process so that its peak RSS is its own.
//   a: fetch and validate, write nothing (the ceiling)
//   b: fetch, then one Drizzle upsert statement per card (the naive baseline)
//   c: cards-sync's own worker, the code path users run

const { values } = parseArgs({
  options: {
    pipeline: { type: 'string' },
    prefix: { type: 'string' },
    api: { type: 'string' },
    key: { type: 'string' },
    db: { type: 'string' },
    redis: { type: 'string' },
    jobs: { type: 'string' },
    concurrency: { type: 'string', default: '16' },
  },
});
const total = Number(values.jobs);
const concurrency = Number(values.concurrency);
const prefix = values.prefix!;
const redisUrl = values.redis!;

async function main() {
  const api = createApiClient(
    { baseUrl: values.api!, apiKey: values.key!, pathStyle: 'standard', timeoutMs: 10_000 },
    { connections: concurrency },
  );
  const handle = createDb(values.db!, { max: concurrency + 2 });
  const redis = createRedis(redisUrl, { blocking: true });
  const queue = createSyncQueue(redis, { prefix });
  const logger = createLogger({ level: 'error' });
  const durations: number[] = [];
  let cards = 0;
  let finished = 0;
  let halfway = 0;
  let doneAt = 0;
  let resolveDone: () => void = () => {};
  const done = new Promise<void>((r) => {
    resolveDone = r;
  });
  const onFinished = (job: Job | undefined) => {
    if (job?.processedOn && job.finishedOn) durations.push(job.finishedOn - job.processedOn);
    finished++;
    if (finished === Math.ceil(total / 2)) halfway = performance.now();
    if (finished >= total) {
      doneAt = performance.now();
      resolveDone();
    }
  };
  const started = performance.now();
  const cpuStart = process.cpuUsage();
  let close: () => Promise<unknown>;
  if (values.pipeline === 'c') {
    const w = await startSyncWorker(
      { db: handle.db, api, logger, queue, redis },
      { redisUrl, prefix, concurrency },
    );
    w.worker.on('completed', (job, result) => {
      cards += result.cardsSeen ?? 0;
      onFinished(job);
    });
    w.worker.on('failed', (job) => onFinished(job));
    close = () => w.close(10_000);
  } else {
    const naive = values.pipeline === 'b';
    const w = new Worker<SyncJobData>(
      QUEUE_NAME,
      async (job, _token, signal) => {
        const outcome = await api.fetchCards(job.data.target, signal ? { signal } : {});
        if (outcome.kind !== 'ok') throw new Error(outcome.kind);
        cards += outcome.cards.length;
        if (!naive) return { n: outcome.cards.length };
        const now = new Date();
        for (const c of outcome.cards) {
          await handle.db
            .insert(savedCards)
            .values({
              ...c,
              createDate: new Date(c.createDate),
              firstSeenAt: now,
              lastSeenAt: now,
              updatedAt: now,
            })
            .onConflictDoUpdate({
              target: savedCards.id,
              set: {
                cardToken: sql`excluded.card_token`,
                binNumber: sql`excluded.bin_number`,
                cardBankName: sql`excluded.card_bank_name`,
                lastSeenAt: sql`excluded.last_seen_at`,
              },
            });
        }
        return { n: outcome.cards.length };
      },
      { connection: createRedis(redisUrl, { blocking: true }), prefix, concurrency },
    );
    w.on('completed', (job) => onFinished(job));
    w.on('failed', (job) => onFinished(job));
    close = () => w.close();
  }
  await done;
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuStart);
  await close();
  durations.sort((x, y) => x - y);
  const pct = (p: number) => durations[Math.min(durations.length - 1, Math.floor(p * durations.length))] ?? 0;
  const result = {
    pipeline: values.pipeline,
    jobs: finished,
    seconds,
    subscribersPerSec: finished / seconds,
    // The second half alone: the steady rate, without the process's start and warm-up.
    steadySubscribersPerSec: (finished - Math.ceil(total / 2)) / ((doneAt - halfway) / 1000),
    cardsPerSec: cards / seconds,
    p50Ms: pct(0.5),
    p99Ms: pct(0.99),
    peakRssMB: process.resourceUsage().maxRSS / 1024,
    workerCpuMs: (cpu.user + cpu.system) / 1000,
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exit(0);
}

main().catch((error) => {
  process.stderr.write(`${(error as Error).stack}\n`);
  process.exit(1);
});
