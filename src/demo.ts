import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import cliProgress from 'cli-progress';
import { sql } from 'drizzle-orm';
import pg from 'pg';
import { createDb } from '../db/client.js';
import { runMigrations } from '../db/migrate.js';
import { freshnessBuckets } from '../db/ops/admin.js';
import { createSyncQueue, enqueueSyncs } from '../jobs/queue.js';
import { createRedis } from '../jobs/redis.js';
import { queueIsIdle, startSyncWorker } from '../jobs/worker.js';
import { createApiClient } from './api/client.js';
import { ensureRedis } from './commands/common.js';
import { startAdmin } from './commands/serve.js';
import { loadConfig } from './config.js';
import type { RedisConfig } from './config-redis.js';
import { ConfigError } from './errors.js';
import { createLogger } from './logger.js';
import { createMetrics } from './metrics.js';
import { createMockApi } from './mock-api/server.js';
import { onShutdown } from './shutdown.js';

// `npm run demo`: the whole pipeline on this machine. Migrate, start the mock API, enqueue 1,000
// subscribers, run the worker until the queue is idle, start the admin server, print a summary,
// and keep serving until Ctrl-C (`npm run demo -- --no-wait` exits after the summary).

const FIX = 'start them with `docker compose up -d postgres redis` (or set DATABASE_URL / REDIS_URL)';
const SUBSCRIBERS = 1000;
const PREFIX = 'cards-sync-demo';

async function postgresProblem(url: string): Promise<string | undefined> {
  const u = new URL(url);
  u.pathname = '/postgres';
  const client = new pg.Client({ connectionString: u.toString(), connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    return undefined;
  } catch (error) {
    return `Postgres does not answer at ${u.hostname}:${u.port || 5432} (${(error as { code?: string }).code ?? (error as Error).message})`;
  } finally {
    await client.end().catch(() => {});
  }
}

async function redisProblem(target: RedisConfig): Promise<string | undefined> {
  const redis = createRedis(target);
  try {
    await ensureRedis(redis, target);
    return undefined;
  } catch (error) {
    return `Redis does not answer: ${(error as Error).message}`;
  } finally {
    redis.disconnect();
  }
}

function table(rows: Record<string, unknown>[]): string {
  if (rows.length === 0) return '   (no rows)';
  const cols = Object.keys(rows[0]!);
  const cell = (v: unknown) => (v === null ? '' : String(v));
  const widths = cols.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (values: string[]) => `   ${values.map((v, i) => v.padEnd(widths[i]!)).join('  ')}`;
  return [
    line(cols),
    line(widths.map((w) => '-'.repeat(w))),
    ...rows.map((r) => line(cols.map((c) => cell(r[c])))),
  ].join('\n');
}

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { 'no-wait': { type: 'boolean', default: false } } });
  const config = loadConfig(process.env);
  const problems = (
    await Promise.all([postgresProblem(config.databaseUrl), redisProblem(config.redis)])
  ).filter(Boolean);
  if (problems.length > 0) {
    for (const p of problems) console.error(`demo: ${p}`);
    console.error(`demo: ${FIX}`);
    return 1;
  }
  console.log('1. migrate');
  const migrated = await runMigrations(config.databaseUrl);
  const applied =
    migrated.applied > 0
      ? `applied ${migrated.applied} migration${migrated.applied === 1 ? '' : 's'}`
      : 'migrations are up to date';
  console.log(`   ${migrated.createdDatabase ? 'created the database; ' : ''}${applied}`);

  const apiKey = `demo-${randomBytes(12).toString('hex')}`;
  const mock = createMockApi({ apiKey, latencyMs: 5, notFoundEvery: 97 });
  const apiUrl = await mock.start();
  console.log(`2. mock Saved Cards API on ${apiUrl} (every 97th subscriber is unknown to it)`);

  const logger = createLogger({ level: 'error' });
  const metrics = createMetrics();
  const handle = createDb(config.databaseUrl, { max: 20, timeoutMs: config.databaseTimeoutMs });
  const redis = createRedis(config.redis, { blocking: true });
  const queue = createSyncQueue(redis, { prefix: PREFIX, attempts: 3 });
  const api = createApiClient({ baseUrl: apiUrl, apiKey, pathStyle: 'standard', timeoutMs: 10_000 });
  const ids = Array.from({ length: SUBSCRIBERS }, (_, i) => 100_001 + i);
  let admin: Awaited<ReturnType<typeof startAdmin>> | undefined;
  let worker: Awaited<ReturnType<typeof startSyncWorker>> | undefined;
  const stop = async () => {
    await admin?.stop();
    await worker?.close(5000);
    await Promise.allSettled([queue.obliterate({ force: true }), api.close(), mock.stop()]);
    await Promise.allSettled([queue.close(), handle.close()]);
    redis.disconnect();
  };
  onShutdown(async () => {
    console.log('\nstopping…');
    await stop();
    return 0;
  }, 15_000);

  for (let i = 0; i < ids.length; i += 500) {
    await enqueueSyncs(
      queue,
      ids.slice(i, i + 500).map((subscriberId) => ({ subscriberId })),
      'manual',
    );
  }
  console.log(`3. enqueued ${SUBSCRIBERS} subscribers (queue prefix ${PREFIX}); the worker syncs them:`);
  worker = await startSyncWorker(
    { db: handle.db, api, logger, queue, redis, metrics },
    { redisUrl: config.redis, prefix: PREFIX, concurrency: 16 },
  );
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
  console.log(`   idle after ${((Date.now() - started) / 1000).toFixed(1)} s`);

  const adminConfig = {
    ...config,
    adminToken: config.adminToken ?? randomBytes(18).toString('hex'),
    queuePrefix: PREFIX,
  };
  admin = await startAdmin(adminConfig, { logger, metrics }).catch(() =>
    startAdmin(adminConfig, { logger, metrics }, { port: 0 }),
  );

  console.log('\n4. what landed (card tokens are never shown)');
  const runs = await handle.db.execute(sql`
    select status, count(*)::int as syncs from sync_runs
    where subscriber_id between 100001 and ${100_000 + SUBSCRIBERS} group by 1 order by 2 desc`);
  console.log(table(runs.rows));
  const perBank = await handle.db.execute(sql`
    select card_bank_name as bank, count(*)::int as active_cards from saved_cards_active
    where subscriber_id between 100001 and ${100_000 + SUBSCRIBERS} group by 1 order by 2 desc, 1`);
  console.log('\n   active cards per bank');
  console.log(table(perBank.rows));
  const f = await freshnessBuckets(handle.db);
  console.log('\n   freshness of every known subscriber (last successful sync)');
  console.log(
    table([
      {
        'within 1 h': f.within1h,
        '1-24 h': f.within24h,
        '1-7 d': f.within7d,
        older: f.older,
        never: f.never,
      },
    ]),
  );

  console.log(`\n5. admin server: ${admin.url}/admin  (user: anything, password: ${adminConfig.adminToken})`);
  console.log(`   jobs dashboard: ${admin.url}/admin/queues   metrics: ${admin.url}/metrics`);
  if (values['no-wait']) {
    await stop();
    return 0;
  }
  console.log('\nPress Ctrl-C to stop.');
  return new Promise<number>(() => {});
}

main().then(
  (code) => {
    process.exitCode = code;
    if (code !== 0) process.exit(code);
  },
  (error) => {
    console.error(
      `demo: ${error instanceof ConfigError ? error.message : `failed: ${(error as Error).message}`}`,
    );
    process.exit(error instanceof ConfigError ? 2 : 1);
  },
);
