import { sql } from 'drizzle-orm';
import { Redis } from 'ioredis';
import pg from 'pg';
import { createDb } from '../db/client.js';
import { runMigrations } from '../db/migrate.js';
import { createApiClient, type Target } from './api/client.js';
import { loadConfig } from './config.js';
import { ConfigError } from './errors.js';
import { createLogger } from './logger.js';
import { createMockApi } from './mock-api/server.js';
import { syncSubscriber } from './sync/sync-subscriber.js';

// `npm run demo`: migrate, start the mock API, sync a handful of subscribers, show what landed.

const FIX = 'start them with `docker compose up -d postgres redis` (or set DATABASE_URL / REDIS_URL)';

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

async function redisProblem(url: string): Promise<string | undefined> {
  const redis = new Redis(url, {
    lazyConnect: true,
    connectTimeout: 3000,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  redis.on('error', () => {});
  try {
    await redis.connect();
    await redis.ping();
    return undefined;
  } catch (error) {
    const u = new URL(url);
    return `Redis does not answer at ${u.hostname}:${u.port || 6379} (${(error as { code?: string }).code ?? (error as Error).message})`;
  } finally {
    redis.disconnect();
  }
}

function table(rows: Record<string, unknown>[]): string {
  if (rows.length === 0) return '(no rows)';
  const cols = Object.keys(rows[0]!);
  const cell = (v: unknown) =>
    v instanceof Date ? v.toISOString().slice(0, 10) : v === null ? '' : String(v);
  const widths = cols.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (values: string[]) => values.map((v, i) => v.padEnd(widths[i]!)).join('  ');
  return [
    line(cols),
    line(widths.map((w) => '-'.repeat(w))),
    ...rows.map((r) => line(cols.map((c) => cell(r[c])))),
  ].join('\n');
}

async function main(): Promise<number> {
  const config = loadConfig(process.env);
  const problems = (
    await Promise.all([postgresProblem(config.databaseUrl), redisProblem(config.redisUrl)])
  ).filter(Boolean);
  if (problems.length > 0) {
    for (const p of problems) console.error(`demo: ${p}`);
    console.error(`demo: ${FIX}`);
    return 1;
  }
  console.log('1. migrate');
  const migrated = await runMigrations(config.databaseUrl);
  const applied =
    migrated.applied > 0 ? `applied ${migrated.applied} migrations` : 'migrations are up to date';
  console.log(`   ${migrated.createdDatabase ? 'created the database; ' : ''}${applied}`);

  const apiKey = 'demo-0b6f8a52-5c1d-4c7e-9f0a-3d2e1b4c5a69';
  const mock = createMockApi({ apiKey, notFoundEvery: 1013 });
  const apiUrl = await mock.start();
  console.log(`2. mock Saved Cards API on ${apiUrl}`);

  const handle = createDb(config.databaseUrl, { max: 4 });
  const api = createApiClient({ baseUrl: apiUrl, apiKey, pathStyle: 'standard', timeoutMs: 10_000 });
  const logger = createLogger({ level: 'error' });
  try {
    console.log('3. sync a handful of subscribers');
    const targets: Target[] = [
      { subscriberId: 1001 },
      { subscriberId: 1002 },
      { subscriberId: 1003 },
      { subscriberId: 1013 },
      { subscriberId: 2027 },
      { email: 'ayse.yilmaz+4242@example.com' },
      { email: 'subscriber-1001@example.com' },
    ];
    for (const target of targets) {
      const r = await syncSubscriber({ db: handle.db, api, logger }, { target, trigger: 'cli' });
      const who = 'subscriberId' in target ? `id ${target.subscriberId}` : target.email;
      const c = r.counts;
      const detail =
        r.status === 'succeeded'
          ? `subscriber ${r.subscriberId}: ${c.cardsSeen} cards (inserted ${c.inserted}, updated ${c.updated}, unchanged ${c.unchanged}, removed ${c.removed})`
          : `${r.errorMessage}`;
      console.log(`   ${r.status.padEnd(10)} ${who.padEnd(30)} ${detail}`);
    }
    console.log('\n4. what landed in saved_cards (card_token is never shown)');
    const cards = await handle.db.execute(sql`
      select id, subscriber_id, bin_number, card_bank_name as bank, card_family as family,
             company_id, to_char(create_date at time zone 'UTC', 'YYYY-MM-DD') as created, removed_at is null as active
      from saved_cards where subscriber_id in (1001, 1002, 1003, 2027, 4242) order by subscriber_id, id`);
    console.log(table(cards.rows));
    const perBank = await handle.db.execute(sql`
      select card_bank_name as bank, count(*)::int as active_cards
      from saved_cards where removed_at is null group by 1 order by 2 desc, 1`);
    console.log('\n   active cards per bank');
    console.log(table(perBank.rows));
    console.log(
      '\nTry it yourself:  psql "$DATABASE_URL" -c "select * from sync_runs order by id desc limit 10"',
    );
    return 0;
  } finally {
    await Promise.all([api.close(), handle.close(), mock.stop()]);
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error) => {
    console.error(
      `demo: ${error instanceof ConfigError ? error.message : `failed: ${(error as Error).message}`}`,
    );
    process.exitCode = error instanceof ConfigError ? 2 : 1;
  },
);
