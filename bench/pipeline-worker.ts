import { parseArgs } from 'node:util';
import { Worker } from 'bullmq';
import { sql } from 'drizzle-orm';
import type pg from 'pg';
import { createDb } from '../db/client.js';
import { savedCards } from '../db/schema/index.js';
import { createRedis } from '../jobs/redis.js';
import { createSyncQueue, QUEUE_NAME, type SyncJobData } from '../jobs/sync/queue.js';
import { startSyncWorker } from '../jobs/sync/worker.js';
import { createApiClient } from '../src/api/client.js';
import type { SavedCard } from '../src/api/schema.js';
import { createLogger } from '../src/logging/index.js';
import { benchRedis, benchTokens } from './harness.js';
import { pipelineClock } from './pipeline-result.js';

// One pipeline of the benchmark, in its own process so that its peak RSS is its own. (r, the raw
// ceiling, has a process of its own that loads none of the product: bench/raw-worker.ts.)
//   a: fetch and validate, write nothing (the ceiling)
//   b: fetch, then one Drizzle upsert statement per card (the naive baseline)
//   c: cards-sync's own worker, the code path users run
//   f: the floor of any sync that stores the cards: a, plus the answers of the jobs running at
//      once written as one statement into a table with a primary key and nothing else (no
//      history, no run ledger, no subscribers, no other index, no read): what cards-sync could
//      at best reach with every table and outcome of docs/analytics.md and docs/architecture.md but the cards left out

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
    /** `CHANGE_EVENTS` of c's worker: on or off (the product's default). */
    'change-events': { type: 'string', default: 'off' },
  },
});
const FLOOR_TABLE = `create table if not exists bench_floor (
  id bigint primary key, subscriber_id bigint, card_token text, bin_number text, card_family text,
  card_bank_code bigint, card_bank_name text, company_id bigint, create_date timestamptz,
  last_seen_at timestamptz)`;
const FLOOR_WRITE = `insert into bench_floor
  select u.*, $1::timestamptz from unnest($2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[],
    $7::bigint[], $8::text[], $9::bigint[], $10::timestamptz[]) as u
  on conflict (id) do update set last_seen_at = excluded.last_seen_at`;

/** f's writer: answers handed over in one turn of the event loop share one statement. */
function floorWriter(pool: pg.Pool) {
  let pending: { cards: readonly SavedCard[]; done: (error?: Error) => void }[] = [];
  const flush = async () => {
    const batch = pending;
    pending = [];
    const cards = batch.flatMap((p) => p.cards).sort((x, y) => x.id - y.id);
    const column = <T>(f: (c: SavedCard) => T) => cards.map(f);
    try {
      await pool.query({
        name: 'bench-floor',
        text: FLOOR_WRITE,
        values: [
          new Date(),
          column((c) => c.id),
          column((c) => c.subscriberId),
          column((c) => c.cardToken),
          column((c) => c.binNumber),
          column((c) => c.cardFamily),
          column((c) => c.cardBankCode),
          column((c) => c.cardBankName),
          column((c) => c.companyId),
          column((c) => c.createDate),
        ],
      });
      for (const p of batch) p.done();
    } catch (error) {
      for (const p of batch) p.done(error as Error);
    }
  };
  return (cards: readonly SavedCard[]) =>
    new Promise<void>((resolve, reject) => {
      if (pending.length === 0) setImmediate(() => void flush());
      pending.push({ cards, done: (error) => (error ? reject(error) : resolve()) });
    });
}

const total = Number(values.jobs);
const concurrency = Number(values.concurrency);
const prefix = values.prefix!;
// The child inherits the environment: without --redis it reads the topology from it.
const redisUrl = benchRedis(values.redis).target;

async function main() {
  const api = createApiClient(
    { baseUrl: values.api!, apiKey: values.key!, pathStyle: 'standard', timeoutMs: 10_000 },
    { connections: concurrency },
  );
  const handle = createDb(values.db!, { max: concurrency + 2 });
  const redis = createRedis(redisUrl, { blocking: true });
  const queue = createSyncQueue(redis, { prefix });
  const logger = createLogger({ level: 'error' });
  const clock = pipelineClock(total);
  let close: () => Promise<unknown>;
  if (values.pipeline === 'c') {
    const w = await startSyncWorker(
      {
        db: handle.db,
        api,
        logger,
        tokens: benchTokens(),
        queue,
        redis,
        changeEvents: values['change-events'] === 'on',
      },
      { redisUrl, prefix, concurrency },
    );
    w.worker.on('completed', (job, result) => {
      clock.addCards(result.cardsSeen ?? 0);
      clock.finished(job);
    });
    w.worker.on('failed', (job) => clock.finished(job, false));
    close = () => w.close(10_000);
  } else {
    const naive = values.pipeline === 'b';
    const floor = values.pipeline === 'f' ? floorWriter(handle.pool) : undefined;
    if (floor) await handle.pool.query(FLOOR_TABLE);
    const w = new Worker<SyncJobData>(
      QUEUE_NAME,
      async (job, _token, signal) => {
        const outcome = await api.fetchCards(job.data.target, signal ? { signal } : {});
        if (outcome.kind !== 'ok') throw new Error(outcome.kind);
        clock.addCards(outcome.cards.length);
        if (floor) await floor(outcome.cards);
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
    w.on('completed', (job) => clock.finished(job));
    w.on('failed', (job) => clock.finished(job, false));
    close = () => w.close();
  }
  await clock.done;
  await close();
  const result = clock.result(values.pipeline!);
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exit(0);
}

main().catch((error) => {
  process.stderr.write(`${(error as Error).stack}\n`);
  process.exit(1);
});
