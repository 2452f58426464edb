import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import cliProgress from 'cli-progress';
import { createDb } from '../../db/client.js';
import { databaseName, dropDatabase, withDatabase } from '../../db/databases.js';
import { runMigrations } from '../../db/migrate.js';
import { createRedis, type RedisClient } from '../../jobs/redis.js';
import { createSyncQueue, enqueueSyncs, queueIsIdle, startSyncWorker } from '../../jobs/sync/index.js';
import { startAdmin } from '../admin/index.js';
import { createApiClient } from '../api/index.js';
import { loadConfig } from '../config/index.js';
import { createLogger } from '../logging/index.js';
import { createMetrics } from '../metrics/index.js';
import { createMockApi } from '../mock-api/index.js';
import { ConfigError, onShutdown } from '../shared/index.js';
import { cardTokens, newKeyMaterial, parseKeyRing } from '../tokens/index.js';
import { FIX, findServices, ServicesMissing } from './services.js';
import { summarize } from './summary.js';
import { type DemoWebhooks, startDemoWebhooks } from './webhooks.js';

// `npm run demo`: the whole pipeline on this machine, in a database and under a queue prefix of
// its own. Migrate, start the mock API and a webhook receiver registered as an endpoint, enqueue
// 1,000 subscribers, run the worker (syncs and webhook delivery) until the queue is idle and the
// run's events have arrived, start the admin server, print what this run did, and keep serving
// until Ctrl-C. On exit it removes what it made: its queue keys and its database (unless --keep),
// or in a database it was told to use, its endpoint.

const USAGE = `usage: npm run demo -- [options]

  --no-wait            exit after the summary (and clean up) instead of serving until Ctrl-C
  --keep               keep the demo's database after exit, to look around in it
  --database-url URL   use this database instead of a new one (its rows are left in place)
  --prefix PREFIX      use this queue prefix instead of a new one (only the demo's jobs are removed)
  --private-servers    start a private Postgres and Redis for this run (from the installed binaries,
                       else Docker) and remove them on exit, whatever answers locally
  -h, --help           this text

Postgres and Redis come from DATABASE_URL and REDIS_URL (default: the local ones); the demo
only uses their server, never the database DATABASE_URL names. A default that does not answer is
replaced by a private one, as with --private-servers.`;

const SUBSCRIBERS = 1000;
const FIRST_ID = 100_001;

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    options: {
      'no-wait': { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
      'database-url': { type: 'string' },
      prefix: { type: 'string' },
      'private-servers': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  }).values;
}

async function main(): Promise<number> {
  let values: ReturnType<typeof parse>;
  try {
    values = parse(process.argv.slice(2));
  } catch (error) {
    console.error(`demo: ${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (values['private-servers'] && (values['database-url'] !== undefined || values.keep)) {
    const other = values.keep ? '--keep (its database goes with it)' : '--database-url';
    console.error(
      `demo: --private-servers removes its own Postgres on exit; it cannot be given ${other} too`,
    );
    return 2;
  }
  const env = process.env;
  const given = loadConfig({
    ...env,
    ...(values['database-url'] !== undefined ? { DATABASE_URL: values['database-url'] } : {}),
  });
  const tag = randomBytes(4).toString('hex');
  const services = await findServices(
    given.databaseUrl,
    given.redis,
    {
      postgres: env.DATABASE_URL !== undefined || values['database-url'] !== undefined,
      redis: [env.REDIS_URL, env.REDIS_SENTINELS, env.REDIS_CLUSTER_NODES].some((v) => v !== undefined),
    },
    values['private-servers'],
  );
  for (const line of services.started) console.log(line);
  if (values.keep && services.privatePostgres) {
    console.log('   --keep keeps nothing here: the database is on the private Postgres, removed on exit');
  }
  const keep = values.keep && !services.privatePostgres;
  const ownDatabase = values['database-url'] === undefined;
  const ownPrefix = values.prefix === undefined;
  const prefix =
    values.prefix ??
    (given.redis.topology === 'cluster' && services.redisUrl === undefined
      ? `{cards-sync-demo-${tag}}`
      : `cards-sync-demo-${tag}`);
  // A private Redis stands in for whatever topology the environment names.
  const { REDIS_SENTINELS: _s, REDIS_CLUSTER_NODES: _c, ...standalone } = env;
  const config = loadConfig({
    ...(services.redisUrl !== undefined ? standalone : env),
    DATABASE_URL: ownDatabase
      ? withDatabase(services.postgresUrl, `cards_sync_demo_${tag}`)
      : services.postgresUrl,
    ...(services.redisUrl !== undefined ? { REDIS_URL: services.redisUrl } : {}),
    QUEUE_PREFIX: prefix,
  });
  const dbName = databaseName(config.databaseUrl);
  // From here on, whatever ends the run (Ctrl-C, an error, --no-wait) stops what it started: the
  // app's part within 10 s whatever hangs, then the private servers.
  let stopApp = async () => {};
  let stopping: Promise<void> | undefined;
  const stopAll = () => {
    stopping ??= (async () => {
      await Promise.race([stopApp().catch(() => {}), sleep(10_000, undefined, { ref: false })]);
      await services.stop();
    })();
    return stopping;
  };
  stopOnError = stopAll;
  onShutdown(async () => {
    console.log('\nstopping…');
    await stopAll();
    console.log(cleanedUp(ownPrefix, ownDatabase && !keep, services.started.length > 0));
    return 0;
  }, 15_000);

  console.log('1. migrate');
  const migrated = await runMigrations(config.databaseUrl);
  const where = ownDatabase
    ? `created database ${dbName} for this run (${keep ? 'kept after exit' : 'dropped on exit; --keep keeps it'})`
    : `database ${dbName}, as told (the demo's rows stay there)`;
  console.log(`   ${where}; applied ${migrated.applied} migration${migrated.applied === 1 ? '' : 's'}`);

  const apiKey = `demo-${randomBytes(12).toString('hex')}`;
  const mock = createMockApi({ apiKey, latencyMs: 5, notFoundEvery: 97 });
  const apiUrl = await mock.start();
  console.log(`2. mock Saved Cards API on ${apiUrl} (every 97th subscriber is unknown to it)`);

  // Sealed as in production: under the configured keys, or a key made for this run.
  const ring = config.tokens.ring ?? parseKeyRing(`demo:${newKeyMaterial()}`);
  const tokens = cardTokens(true, ring);
  const logger = createLogger({ level: 'error' });
  const metrics = createMetrics();
  const handle = createDb(config.databaseUrl, { max: 20, timeoutMs: config.databaseTimeoutMs });
  const redis = createRedis(config.redis, { blocking: true });
  const queue = createSyncQueue(redis, { prefix, attempts: 3 });
  const api = createApiClient({ baseUrl: apiUrl, apiKey, pathStyle: 'standard', timeoutMs: 10_000 });
  const ids = Array.from({ length: SUBSCRIBERS }, (_, i) => FIRST_ID + i);
  const jobIds: string[] = [];
  let admin: Awaited<ReturnType<typeof startAdmin>> | undefined;
  let worker: Awaited<ReturnType<typeof startSyncWorker>> | undefined;
  let webhooks: DemoWebhooks | undefined;
  stopApp = async () => {
    await admin?.stop();
    await worker?.close(5000);
    await webhooks?.stop({ deleteEndpoint: !ownDatabase }).catch(() => {});
    await Promise.allSettled([api.close(), mock.stop()]);
    // Only what this run made: with its own prefix every key under it, else the jobs it added.
    if (!ownPrefix) await Promise.allSettled(jobIds.map((id) => queue.remove(id)));
    await Promise.allSettled([queue.close(), handle.close()]);
    if (ownPrefix) await deleteKeysUnder(redis, prefix).catch(() => 0);
    redis.disconnect();
    if (ownDatabase && !keep) await dropDatabase(config.databaseUrl).catch(() => {});
  };

  webhooks = await startDemoWebhooks(config, ring, handle.pool, logger);
  console.log(`   webhook receiver on ${webhooks.url}, registered as an endpoint for this run`);
  const since = new Date();
  for (let i = 0; i < ids.length; i += 500) {
    const added = await enqueueSyncs(
      queue,
      ids.slice(i, i + 500).map((subscriberId) => ({ subscriberId })),
      'manual',
    );
    jobIds.push(...added.jobIds);
  }
  console.log(`3. enqueued ${SUBSCRIBERS} subscribers (queue prefix ${prefix}); the worker syncs them:`);
  worker = await startSyncWorker(
    // The demo shows change events reaching a webhook receiver: events are on for it (off by default).
    { db: handle.db, api, logger, tokens, queue, redis, metrics, changeEvents: true },
    { redisUrl: config.redis, prefix, concurrency: 16 },
  );
  await waitForIdle(queue);

  console.log('\n4. what landed (card tokens are never shown)');
  console.log(await summarize(handle.db, { firstId: FIRST_ID, lastId: FIRST_ID + SUBSCRIBERS - 1, since }));
  console.log('');
  console.log(await webhooks.summary(30_000));

  if (values['no-wait']) {
    // No address or password of a server that is gone by the time they are read.
    console.log('\n5. admin server: not started with --no-wait (run the demo without it to browse /admin)');
    if (ownDatabase && keep) console.log(`   psql: psql ${redactPassword(config.databaseUrl)}`);
    await stopAll();
    console.log(cleanedUp(ownPrefix, ownDatabase && !keep, services.started.length > 0));
    return 0;
  }
  const adminConfig = { ...config, adminToken: config.adminToken ?? randomBytes(18).toString('hex') };
  admin = await startAdmin(adminConfig, { logger, metrics }).catch(() =>
    startAdmin(adminConfig, { logger, metrics }, { port: 0 }),
  );
  console.log(`\n5. admin server: ${admin.url}/admin  (user: anything, password: ${adminConfig.adminToken})`);
  console.log(`   jobs dashboard: ${admin.url}/admin/queues   metrics: ${admin.url}/metrics`);
  if (ownDatabase && keep) console.log(`   psql: psql ${redactPassword(config.databaseUrl)}`);
  console.log('\nPress Ctrl-C to stop.');
  return new Promise<number>(() => {});
}

async function waitForIdle(queue: ReturnType<typeof createSyncQueue>): Promise<void> {
  const bar = process.stdout.isTTY
    ? new cliProgress.SingleBar(
        { format: '   [{bar}] {value}/{total} jobs | {eta_formatted} left' },
        cliProgress.Presets.shades_classic,
      )
    : undefined;
  bar?.start(SUBSCRIBERS, 0);
  const started = Date.now();
  let lastLine = 0;
  for (;;) {
    const c = await queue.getJobCounts('completed', 'failed');
    const done = (c.completed ?? 0) + (c.failed ?? 0);
    bar?.update(done);
    if (!bar && Date.now() - lastLine > 2000) {
      lastLine = Date.now();
      console.log(`   ${done}/${SUBSCRIBERS} jobs done`);
    }
    if (done >= SUBSCRIBERS && (await queueIsIdle(queue))) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  bar?.stop();
  // On a terminal the bar ended at the total; elsewhere the last progress line may be seconds old.
  if (!bar) console.log(`   ${SUBSCRIBERS}/${SUBSCRIBERS} jobs done`);
  console.log(`   idle after ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

function redactPassword(url: string): string {
  const u = new URL(url);
  if (u.password) u.password = '***';
  return u.toString();
}

function cleanedUp(ownPrefix: boolean, droppedDatabase: boolean, privateServers: boolean): string {
  const what = [ownPrefix ? "removed the demo's queue keys" : "removed the demo's jobs"];
  if (droppedDatabase) what.push('dropped its database');
  if (privateServers) what.push('stopped and removed its private servers');
  return `\ncleaned up: ${what.join(', ')}`;
}

/** Deletes every key that starts with `prefix:` (on each master of a Cluster). Returns how many. */
async function deleteKeysUnder(redis: RedisClient, prefix: string): Promise<number> {
  const match = `${prefix.replace(/[*?[\]\\]/g, '\\$&')}:*`;
  const nodes = 'nodes' in redis && typeof redis.nodes === 'function' ? redis.nodes('master') : [redis];
  let deleted = 0;
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', match, 'COUNT', 1000);
      cursor = next;
      // One key at a time: a Cluster refuses a multi-key DEL across slots.
      for (const key of keys) deleted += await node.del(key);
    } while (cursor !== '0');
  }
  return deleted;
}

/** Set once the demo has started something: what an error must stop before the process exits. */
let stopOnError: (() => Promise<void>) | undefined;

main().then(
  (code) => {
    process.exitCode = code;
    if (code !== 0) process.exit(code);
  },
  async (error) => {
    await stopOnError?.().catch(() => {});
    if (error instanceof ServicesMissing) {
      for (const p of error.problems) console.error(`demo: ${p}`);
      console.error(`demo: ${FIX}`);
      process.exit(1);
    }
    console.error(
      `demo: ${error instanceof ConfigError ? error.message : `failed: ${(error as Error).message}`}`,
    );
    process.exit(error instanceof ConfigError ? 2 : 1);
  },
);
