import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { Webhook } from 'standardwebhooks';
import { setEndpointEnabled } from '../db/webhooks/endpoints.js';
import { closeRedis, createRedis } from '../jobs/redis.js';
import { createSyncQueue, enqueueSyncs } from '../jobs/sync/queue.js';
import { FEED_START } from '../src/events/index.js';
import { createMockApi } from '../src/mock-api/server.js';
import { parseKeyRing } from '../src/tokens/keyring.js';
import { insertEndpoint } from '../src/webhooks/endpoint-secrets.js';
import { feedHead, takeEvents } from '../src/webhooks/fanout.js';
import { pct, waitUntil, walPerEvent } from './changes-measure.js';
import { startReceiver } from './changes-receiver.js';
import {
  BENCH_CARD_TOKEN_KEYS,
  benchRedis,
  CLI,
  cliEnv,
  databaseFlag,
  parseFlags,
  REDIS_FLAG,
  resetDatabase,
  seedingPool,
  wholeNumber,
} from './harness.js';
import { holdWal, markBefore, walPosition } from './wal.js';

// npm run bench:changes [-- --subscribers 5000 --rates 100,1000 --seconds 30 --drain-endpoints 1,8]
//
// Change events, end to end: a `cards-sync worker` process, as a user starts it, syncs
// against the sandbox, whose every wallet changes about once a second (so each sync of a wallet
// last synced seconds ago finds it changed); the outbox writes the events in the syncs'
// transactions, and the worker's delivery loop posts them to a receiver on loopback here, which
// verifies each with `standardwebhooks`. Phases, on a database of its own:
//   1. import: every subscriber's first sync, no endpoint yet: the backlog, and WAL per added card;
//   2. drain: for each --drain-endpoints k, k endpoints each with the import's newest --backlog
//      events, made deliveries here (fan-out is not timed), one fresh worker: deliveries a second
//      from the first receipt to the last;
//   3. live: for each --rates r, one endpoint from the feed's head, syncs enqueued at r divided by
//      the events a changed sync makes (measured in a warm-up); latency from each event's
//      `created_at` (the write's clock, taken before its transaction: the figure includes the
//      write's own time up to its commit) to its receipt, and WAL per changed card by relation.

const { values } = parseFlags({
  options: {
    subscribers: { type: 'string', default: '5000' },
    rates: { type: 'string', default: '100,1000' },
    seconds: { type: 'string', default: '30' },
    'drain-endpoints': { type: 'string', default: '1,8' },
    /** Events of the import each drain endpoint takes (the newest this many). */
    backlog: { type: 'string', default: '5000' },
    concurrency: { type: 'string', default: '16' },
    ...databaseFlag('cards_sync_bench_changes'),
    ...REDIS_FLAG,
  },
});
const n = wholeNumber('subscribers', values.subscribers, 100);
const seconds = wholeNumber('seconds', values.seconds, 5);
const concurrency = wholeNumber('concurrency', values.concurrency, 1);
const rates = values.rates!.split(',').map((r) => wholeNumber('rates', r, 1));
const drains = values['drain-endpoints']!.split(',').map((k) => wholeNumber('drain-endpoints', k, 1));
const backlogFlag = wholeNumber('backlog', values.backlog, 1);
const databaseUrl = values['database-url']!;
const redis = benchRedis(values['redis-url']);
const KEY = 'bench-changes-key';
const ring = parseKeyRing(BENCH_CARD_TOKEN_KEYS);

// The receiver: every delivery verified; the latency of each event's first receipt.
const receiver = await startReceiver();
const { secrets, firstSeen, counts } = receiver;
const receiverUrl = receiver.url;

await resetDatabase(databaseUrl);
const pool = seedingPool(databaseUrl, 3);
await pool.query('insert into subscribers (subscriber_id) select g from generate_series(1, $1::int) g', [n]);
const mock = createMockApi({
  apiKey: KEY,
  recordRequests: false,
  changes: { classes: [{ share: 1, perSecond: 1 }], seed: 37 },
});
await mock.start();
const prefix = redis.tag(`changes-${Date.now().toString(36)}`);
const connection = createRedis(redis.target);
const queue = createSyncQueue(connection, { prefix });

function startWorker(): ChildProcess {
  return spawn(process.execPath, [CLI, 'worker', '--concurrency', String(concurrency)], {
    stdio: ['ignore', 'inherit', 'inherit'],
    env: {
      ...cliEnv({ redisEnv: redis.env, databaseUrl, apiUrl: mock.url, apiKey: KEY, prefix }),
      SYNC_RATE_LIMIT_PER_SEC: '100000',
      WEBHOOK_ALLOW_PRIVATE: 'true',
      CHANGE_EVENTS: 'on',
      REFRESH_CRON: '0 0 1 1 *',
    },
  });
}
async function stopWorker(w: ChildProcess): Promise<void> {
  w.kill('SIGTERM');
  if (w.exitCode === null) await once(w, 'exit');
}
const count = async (sql: string, params: unknown[] = []) =>
  Number((await pool.query<{ n: string }>(sql, params)).rows[0]!.n);
async function addEndpoint(name: string, cursor: string): Promise<number> {
  const { id, secret } = await insertEndpoint(pool, ring, {
    url: `${receiverUrl}/${name}`,
    description: `bench ${name}`,
    eventTypes: null,
    feedCursor: cursor,
  });
  secrets.set(`/${name}`, new Webhook(secret));
  return id;
}

const report: Record<string, unknown> = { subscribers: n, concurrency };
const release = await holdWal(databaseUrl);
try {
  // 1. Import: the backlog.
  const before = await markBefore(databaseUrl);
  let worker = startWorker();
  const t0 = Date.now();
  await enqueueSyncs(
    queue,
    Array.from({ length: n }, (_, i) => ({ subscriberId: i + 1 })),
    'manual',
  );
  await waitUntil(
    'the import',
    async () => (await count('select count(*) as n from sync_runs')) >= n,
    600_000,
  );
  const importSec = (Date.now() - t0) / 1000;
  const imported = await count('select count(*) as n from change_events');
  const afterImport = await walPosition(databaseUrl);
  await stopWorker(worker);
  report.import = {
    syncsPerSec: Math.round(n / importSec),
    events: imported,
    walPerAddedCard: await walPerEvent(databaseUrl, before.lsn, afterImport, imported),
  };
  console.log(JSON.stringify({ import: report.import }));

  // 2. Drain: one worker, k endpoints from the feed's start.
  const backlog = Math.min(backlogFlag, imported);
  const { rows: at } = await pool.query<{ cursor: string }>(
    `select txid::text || '-' || seq::text as cursor from change_events order by txid, seq
     offset $1 limit 1`,
    [imported - backlog - 1],
  );
  const drainFrom = imported - backlog - 1 < 0 ? FEED_START : at[0]!.cursor;
  const drained: unknown[] = [];
  for (const k of drains) {
    const ids: number[] = [];
    for (let i = 0; i < k; i++) ids.push(await addEndpoint(`drain-${k}-${i}`, drainFrom));
    // The endpoints' deliveries made here, on whatever statistics the table has: the claim reads
    // the due index in its own order whatever they say (test/integration/webhook-claim.test.ts).
    for (const id of ids) while (((await takeEvents(pool, id))?.read ?? 0) > 0);
    const mark = firstSeen.size;
    const start = Date.now();
    worker = startWorker();
    await waitUntil('the drain', async () => firstSeen.size - mark >= k * backlog, 600_000);
    const times = [...firstSeen.values()].slice(mark).map((s) => s.at);
    await stopWorker(worker);
    for (const id of ids) await setEndpointEnabled(pool, id, false, 'bench: drained');
    const span = (Math.max(...times) - Math.min(...times)) / 1000;
    const r = {
      endpoints: k,
      deliveries: times.length,
      perSec: Math.round(times.length / span),
      sinceStartPerSec: Math.round(times.length / ((Math.max(...times) - start) / 1000)),
    };
    drained.push(r);
    console.log(JSON.stringify({ drain: r }));
  }
  report.drain = drained;

  // 3. Live: changes at each rate through real syncs.
  const live: unknown[] = [];
  let next = 1;
  const enqueueNext = async (count: number) => {
    const targets = Array.from({ length: count }, () => {
      const subscriberId = next;
      next = (next % n) + 1;
      return { subscriberId };
    });
    await enqueueSyncs(queue, targets, 'manual');
  };
  worker = startWorker();
  // Warm-up: the events a changed sync makes.
  const runs0 = await count('select count(*) as n from sync_runs');
  const events0 = await count('select count(*) as n from change_events');
  await enqueueNext(500);
  await waitUntil(
    'the warm-up',
    async () => (await count('select count(*) as n from sync_runs')) >= runs0 + 500,
    120_000,
  );
  const perSync = ((await count('select count(*) as n from change_events')) - events0) / 500;
  report.eventsPerChangedSync = Math.round(perSync * 100) / 100;
  for (const rate of rates) {
    const name = `live-${rate}`;
    const endpoint = await addEndpoint(name, await feedHead(pool));
    const mark = await markBefore(databaseUrl);
    const phaseStart = new Date();
    const syncsPerSec = rate / perSync;
    let owed = 0;
    let last = Date.now();
    const end = Date.now() + seconds * 1000;
    while (Date.now() < end) {
      await sleep(100);
      const now = Date.now();
      owed += ((now - last) / 1000) * syncsPerSec;
      last = now;
      const due = Math.floor(owed);
      owed -= due;
      // Never more than 2 s of syncs waiting: past the worker's ceiling, the rate reached is its maximum.
      if ((await queue.getWaitingCount()) < 2 * syncsPerSec) await enqueueNext(due);
    }
    await waitUntil(
      'the queue',
      async () => (await queue.getWaitingCount()) + (await queue.getActiveCount()) === 0,
      120_000,
    );
    const lsn = await walPosition(databaseUrl);
    const { rows } = await pool.query<{ n: string; first: Date; last: Date; changed: string }>(
      `select count(*) as n, min(created_at) as first, max(created_at) as last,
         count(*) filter (where type = 'card.changed') as changed
       from change_events where created_at >= $1`,
      [phaseStart],
    );
    const events = Number(rows[0]!.n);
    await waitUntil(
      'every event received',
      async () => [...firstSeen.keys()].filter((key) => key.startsWith(`/${name} `)).length >= events,
      120_000,
    );
    await setEndpointEnabled(pool, endpoint, false, 'bench: phase over');
    const latencies = [...firstSeen.entries()]
      .filter(([key]) => key.startsWith(`/${name} `))
      .map(([, s]) => s.latencyMs)
      .sort((a, b) => a - b);
    const span = (rows[0]!.last.getTime() - rows[0]!.first.getTime()) / 1000;
    const r = {
      target: rate,
      eventsPerSec: Math.round(events / span),
      events,
      changed: Number(rows[0]!.changed),
      received: latencies.length,
      p50ms: pct(latencies, 50),
      p99ms: pct(latencies, 99),
      maxMs: latencies.at(-1),
      walPerEvent: await walPerEvent(databaseUrl, mark.lsn, lsn, events),
    };
    live.push(r);
    console.log(JSON.stringify({ live: r }));
  }
  await stopWorker(worker);
  report.live = live;
  report.verifyFailures = counts.failures;
  report.deliveriesReceived = counts.received;
} finally {
  await release();
  await queue.obliterate({ force: true }).catch(() => {});
  await queue.close();
  await closeRedis(connection);
  await mock.stop();
  await pool.end();
  receiver.server.closeAllConnections();
  receiver.server.close();
}
console.log(JSON.stringify(report, null, 2));
