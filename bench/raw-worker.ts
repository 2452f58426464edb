import { parseArgs } from 'node:util';
import { Worker } from 'bullmq';
import { Pool } from 'undici';
import { createRedis } from '../jobs/redis.js';
import type { RedisConfig } from '../src/config/redis.js';
import { pipelineClock } from './pipeline-result.js';

// r, the raw ceiling: what a BullMQ worker that fetches each job's subscriber over undici costs
// when it does nothing else. A Worker with BullMQ's defaults (only connection, prefix and
// concurrency set), jobs added by a plain addBulk without options, one request a job on a Pool of
// as many connections as the client of a has, and JSON.parse of the body: no validation, no
// logging, no metrics, no deadline. Its own process, which loads none of cards-sync's sync, db or
// api modules (jobs/redis.ts is ioredis alone), so that its memory and start are BullMQ's and
// undici's only.

const { values } = parseArgs({
  options: {
    prefix: { type: 'string' },
    queue: { type: 'string' },
    api: { type: 'string' },
    key: { type: 'string' },
    jobs: { type: 'string' },
    concurrency: { type: 'string', default: '16' },
  },
});
const total = Number(values.jobs);
const concurrency = Number(values.concurrency);
// The parent's Redis topology (bench/harness.ts benchRedis), as JSON in the environment: a URL on
// the command line could show a password to `ps`.
const redisTarget = JSON.parse(process.env.BENCH_REDIS_TARGET ?? '""') as string | RedisConfig;
// The same headers as the product's client sends, so the API parses the same request.
const headers = {
  accept: 'application/json',
  'content-type': 'application/json',
  'cache-control': 'no-cache',
  authorization: `Apikey ${values.key}`,
};

async function main() {
  const pool = new Pool(values.api!, { connections: concurrency, keepAliveTimeout: 30_000 });
  const clock = pipelineClock(total);
  const worker = new Worker<{ target: { subscriberId: number } }, number>(
    values.queue!,
    async (job) => {
      const { statusCode, body } = await pool.request({
        method: 'GET',
        path: `/api/saved-cards/subscriber/${job.data.target.subscriberId}`,
        headers,
      });
      const cards = JSON.parse(await body.text()) as unknown[];
      // One comparison, so that a broken set-up shows as failed jobs rather than as a fast run.
      if (statusCode !== 200) throw new Error(`HTTP ${statusCode}`);
      return cards.length;
    },
    { connection: createRedis(redisTarget, { blocking: true }), prefix: values.prefix!, concurrency },
  );
  worker.on('completed', (job, n) => {
    clock.addCards(n);
    clock.finished(job);
  });
  worker.on('failed', (job) => clock.finished(job, false));
  await clock.done;
  await worker.close();
  process.stdout.write(`${JSON.stringify(clock.result('r'))}\n`);
  process.exit(0);
}

main().catch((error) => {
  process.stderr.write(`${(error as Error).stack}\n`);
  process.exit(1);
});
