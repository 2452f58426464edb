import { type ChildProcess, spawn } from 'node:child_process';
import { type ParseArgsConfig, parseArgs } from 'node:util';
import pg from 'pg';
import { declareKnownMigration } from '../db/fence.js';
import { runMigrations } from '../db/migrate.js';
import { loadConfig } from '../src/config/index.js';
import type { RedisConfig } from '../src/config/redis.js';
import { type CardTokens, cardTokens } from '../src/tokens/card-tokens.js';
import { newKeyMaterial, parseKeyRing } from '../src/tokens/keyring.js';

// What the benchmarks share: a database of their own, made anew, and an API as a process.

const here = new URL('.', import.meta.url).pathname;
/** The built CLI, as a user runs it. */
export const CLI = `${here}../../bin/cards-sync.js`;

/** Drops the benchmark's own database and migrates it afresh (with another release's migrations, given their folder). */
export async function resetDatabase(databaseUrl: string, migrationsFolder?: string): Promise<void> {
  const admin = new pg.Client({ connectionString: databaseUrl.replace(/\/[^/]+$/, '/postgres') });
  await admin.connect();
  await admin.query(`drop database if exists "${new URL(databaseUrl).pathname.slice(1)}" with (force)`);
  await admin.end();
  await runMigrations(databaseUrl, migrationsFolder === undefined ? {} : { folder: migrationsFolder });
}

/**
 * A pool for a benchmark's own seeding: it writes as this release does, so it declares what the
 * release knows to the writer fence (db/fence.ts) on each connection.
 */
export function seedingPool(databaseUrl: string, max: number): pg.Pool {
  return new pg.Pool({
    connectionString: databaseUrl,
    max,
    onConnect: async (client: pg.ClientBase) => {
      await client.query(declareKnownMigration());
    },
  });
}

/** `cards-sync mock-api` on a free loopback port; resolves once it listens. */
export async function startMockApi(
  key: string,
  cardsPerSubscriber: number,
): Promise<{ url: string; child: ChildProcess }> {
  return spawnListening(
    [CLI, 'mock-api', '--port', '0', '--api-key', key, '--cards-per-subscriber', String(cardsPerSubscriber)],
    'the mock API',
  );
}

/**
 * The benchmark's API (bench/raw-api.ts) on a free loopback port, with the answers of subscribers
 * 1..`subscribers` serialised before it listens; resolves once it listens.
 */
export async function startRawApi(
  key: string,
  cardsPerSubscriber: number,
  subscribers: number,
): Promise<{ url: string; child: ChildProcess }> {
  return spawnListening(
    [
      `${here}raw-api.js`,
      '--key',
      key,
      '--cards',
      String(cardsPerSubscriber),
      '--subscribers',
      String(subscribers),
    ],
    'the raw API',
  );
}

/** Starts a Node process and resolves with the address it prints once it listens. */
async function spawnListening(args: string[], what: string): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  for await (const chunk of child.stdout!) {
    out += chunk;
    const m = /listening on (http:\/\/\S+)/.exec(out);
    if (m) return { url: m[1]!, child };
  }
  throw new Error(`${what} did not start`);
}

/** The command line by `config`, or a one-line refusal (exit 2) of a flag it does not know. */
export function parseFlags<T extends ParseArgsConfig>(config: T): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config);
  } catch (error) {
    console.error((error as Error).message);
    process.exit(2);
  }
}

/**
 * `--database-url`: BENCH_DATABASE_URL, or else a database of the benchmark's own on the local
 * server (`name`), which it drops and makes anew.
 */
export function databaseFlag(name: string) {
  return {
    'database-url': {
      type: 'string',
      default: process.env.BENCH_DATABASE_URL ?? `postgres://postgres:postgres@127.0.0.1:5432/${name}`,
    },
  } as const;
}

/** `--redis-url`; without it, the topology of the environment (REDIS_URL, REDIS_SENTINELS…, REDIS_CLUSTER_NODES). */
export const REDIS_FLAG = { 'redis-url': { type: 'string' } } as const;

/** A whole-number flag of at least `min`, or a one-line refusal (exit 2). */
export function wholeNumber(flag: string, value: string | undefined, min: number): number {
  const x = Number(value);
  if (!/^\d+$/.test(value ?? '') || !Number.isSafeInteger(x) || x < min) {
    console.error(`--${flag} must be a whole number of at least ${min}, not "${value}"`);
    process.exit(2);
  }
  return x;
}

/**
 * The Redis a benchmark uses, through the one connection factory: `--redis-url` if given, else the
 * topology of the environment (`REDIS_URL`, `REDIS_SENTINELS…`, `REDIS_CLUSTER_NODES`, TLS), as
 * every cards-sync command reads it. `tag` makes a prefix a {hash tag} on a Cluster; `env` names the
 * topology to a child process.
 */
export function benchRedis(flag: string | undefined): {
  target: string | RedisConfig;
  env: Record<string, string>;
  tag(prefix: string): string;
} {
  if (flag !== undefined) return { target: flag, env: { REDIS_URL: flag }, tag: (p) => p };
  const config = loadConfig(process.env).redis;
  const env = Object.fromEntries(
    Object.entries(process.env).filter(
      (e): e is [string, string] => /^REDIS_/.test(e[0]) && typeof e[1] === 'string',
    ),
  );
  return {
    target: config,
    env: { ...env, REDIS_URL: config.url },
    tag: (p) => (config.topology === 'cluster' ? `{${p}}` : p),
  };
}

/**
 * The benchmarks' card-token key ring: tokens are sealed, as in production (CARD_TOKEN_ENCRYPTION=on).
 * One ring per run: a benchmark's child process takes its parent's from `BENCH_CARD_TOKEN_KEYS`, so
 * that a pipeline over rows another process sealed (c unchanged after c) can compare their tokens.
 * Under a ring of its own, every stored token would read as changed.
 */
export const BENCH_CARD_TOKEN_KEYS = process.env.BENCH_CARD_TOKEN_KEYS ?? `bench:${newKeyMaterial()}`;

/** How an in-process benchmark worker stores tokens: sealed under {@link BENCH_CARD_TOKEN_KEYS}. */
export function benchTokens(): CardTokens {
  return cardTokens(true, parseKeyRing(BENCH_CARD_TOKEN_KEYS));
}

/**
 * The environment of a `cards-sync` child a benchmark starts as an operator would: this process's,
 * the Redis of `redis` (`benchRedis`), the database, the sandbox and its key, the benchmarks' key
 * ring, a queue prefix of its own and warnings only in the log. A caller adds its own settings.
 */
export function cliEnv(o: {
  redisEnv: Record<string, string>;
  databaseUrl: string;
  apiUrl: string;
  apiKey: string;
  prefix: string;
}): NodeJS.ProcessEnv {
  return {
    ...process.env,
    ...o.redisEnv,
    DATABASE_URL: o.databaseUrl,
    CARDS_API_BASE_URL: o.apiUrl,
    CARDS_API_KEY: o.apiKey,
    CARD_TOKEN_KEYS: BENCH_CARD_TOKEN_KEYS,
    QUEUE_PREFIX: o.prefix,
    LOG_LEVEL: 'warn',
  };
}
