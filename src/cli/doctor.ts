import type pg from 'pg';
import { rootCause } from '../../db/errors.js';
import { appliedCount, shippedCount } from '../../db/migrate.js';
import { checkClient, serverClockMs, serverVersion, sessionUsesTls } from '../../db/server.js';
import { tokensByKey } from '../../db/tokens/index.js';
import { createRedis, evictionPolicy, type RedisClient } from '../../jobs/redis.js';
import { createApiClient } from '../api/index.js';
import { type Config, HOW_TO_MAKE_A_KEY } from '../config/index.js';
import type { Io } from './common.js';
import { ensureRedis } from './common.js';
import { describeDbError } from './db-problem.js';
import { changeEventsCheck } from './doctor-events.js';
import { fleetCheck } from './doctor-fleet.js';
import { ledgerCheck } from './doctor-ledger.js';
import { tracingCheck } from './doctor-tracing.js';

export type Verdict = 'ok' | 'WARN' | 'FAIL';
interface Check {
  verdict: Verdict;
  name: string;
  /** What was found, and for WARN and FAIL what to do. Never a secret. */
  says: string;
}

/** Skew between this host's clock and Postgres's that fails the check, ms. */
const MAX_SKEW_MS = 2000;

function where(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || 5432}${u.pathname}`;
  } catch {
    return 'the configured database';
  }
}

async function postgresChecks(config: Config): Promise<Check[]> {
  const at = `Postgres at ${where(config.databaseUrl)}`;
  let client: Awaited<ReturnType<typeof checkClient>>;
  try {
    client = await checkClient(config.databaseUrl);
  } catch (error) {
    const fix = describeDbError(error, config.databaseUrl) ?? `cannot connect: ${rootCause(error).message}`;
    return [
      { verdict: 'FAIL', name: 'postgres', says: fix },
      { verdict: 'FAIL', name: 'migrations', says: 'not checked: Postgres does not answer' },
      { verdict: 'FAIL', name: 'clock', says: 'not checked: Postgres does not answer' },
      { verdict: 'FAIL', name: 'card tokens', says: 'not checked: Postgres does not answer' },
    ];
  }
  try {
    const checks: Check[] = [];
    const version = (await serverVersion(client)) ?? '?';
    const ssl = await sessionUsesTls(client);
    checks.push({
      verdict: 'ok',
      name: 'postgres',
      says: `${at} answers (PostgreSQL ${version}${ssl ? ', TLS' : ''})`,
    });
    const applied = await appliedCount(client);
    const shipped = shippedCount();
    checks.push(
      applied >= shipped
        ? { verdict: 'ok', name: 'migrations', says: `all ${shipped} applied` }
        : {
            verdict: 'FAIL',
            name: 'migrations',
            says: `${applied} of ${shipped} applied; run \`cards-sync migrate\``,
          },
    );
    const t0 = Date.now();
    const pgNow = await serverClockMs(client);
    const skew = Math.round(pgNow - (t0 + Date.now()) / 2);
    checks.push(
      Math.abs(skew) <= MAX_SKEW_MS
        ? { verdict: 'ok', name: 'clock', says: `within ${Math.abs(skew)} ms of Postgres's` }
        : {
            verdict: 'FAIL',
            name: 'clock',
            says: `${(skew / 1000).toFixed(1)} s off Postgres's clock (more than ${MAX_SKEW_MS / 1000} s): run time sync (chrony, systemd-timesyncd) on this host or the database's`,
          },
    );
    if (applied >= shipped) checks.push(await tokenCheck(client, config));
    if (applied >= shipped) checks.push(await fleetCheck(config));
    if (applied >= shipped) checks.push(await ledgerCheck(client, config.syncRunsRetentionDays));
    if (applied >= shipped) checks.push(await changeEventsCheck(config));
    return checks;
  } finally {
    await client.end().catch(() => {});
  }
}

/** How tokens are stored: the setting, the ring, and what `tokens rotate` has left to do. */
async function tokenCheck(client: pg.Client, config: Config): Promise<Check> {
  const rows = await tokensByKey(client);
  const plain = rows.find((r) => r.key === null)?.n ?? 0;
  const sealed = rows.filter((r) => r.key !== null) as { key: string; n: number }[];
  const ring = config.tokens.ring;
  if (config.tokens.encryption === 'off') {
    return {
      verdict: 'WARN',
      name: 'card tokens',
      says: `CARD_TOKEN_ENCRYPTION=off: new tokens are stored as received (${plain} in plain text now); set it on with CARD_TOKEN_KEYS, then run \`cards-sync tokens rotate\``,
    };
  }
  if (ring === undefined) {
    return {
      verdict: 'FAIL',
      name: 'card tokens',
      says: `${HOW_TO_MAKE_A_KEY.replace(/^generate/, 'CARD_TOKEN_KEYS is not set: generate')}; or choose CARD_TOKEN_ENCRYPTION=off`,
    };
  }
  const lost = sealed.filter((r) => !ring.ids.includes(r.key));
  if (lost.length > 0) {
    const n = lost.reduce((a, r) => a + r.n, 0);
    return {
      verdict: 'FAIL',
      name: 'card tokens',
      says: `${n} tokens are sealed under key${lost.length === 1 ? '' : 's'} ${lost.map((r) => r.key).join(', ')}, which CARD_TOKEN_KEYS does not hold: add ${lost.length === 1 ? 'it' : 'them'} back`,
    };
  }
  const older = sealed.filter((r) => r.key !== ring.primaryId).reduce((a, r) => a + r.n, 0);
  const keys = `ring ${ring.ids.join(', ')}`;
  if (plain + older > 0) {
    return {
      verdict: 'WARN',
      name: 'card tokens',
      says: `sealing under key ${ring.primaryId} (${keys}); ${plain} tokens in plain text and ${older} under older keys: run \`cards-sync tokens rotate\``,
    };
  }
  return {
    verdict: 'ok',
    name: 'card tokens',
    says: `every stored token sealed under key ${ring.primaryId} (${keys})`,
  };
}

async function redisChecks(config: Config): Promise<Check[]> {
  const redis: RedisClient = createRedis(config.redis);
  try {
    try {
      await ensureRedis(redis, config.redis);
    } catch (error) {
      return [{ verdict: 'FAIL', name: 'redis', says: (error as Error).message }];
    }
    const checks: Check[] = [{ verdict: 'ok', name: 'redis', says: `answers (${config.redis.topology})` }];
    const policy = await evictionPolicy(redis);
    checks.push(
      policy === 'noeviction'
        ? { verdict: 'ok', name: 'redis eviction', says: 'maxmemory-policy noeviction' }
        : policy === undefined
          ? {
              verdict: 'WARN',
              name: 'redis eviction',
              says: 'CONFIG is not allowed here: make sure your provider sets maxmemory-policy noeviction',
            }
          : {
              verdict: 'FAIL',
              name: 'redis eviction',
              says: `maxmemory-policy is ${policy}: Redis may drop queued jobs under memory pressure; set maxmemory-policy noeviction`,
            },
    );
    const read = async (key: string) =>
      ((await redis.config('GET', key).catch(() => undefined)) as string[] | undefined)?.[1];
    const [aof, save] = [await read('appendonly'), await read('save')];
    checks.push(
      aof === 'yes'
        ? { verdict: 'ok', name: 'redis persistence', says: 'appendonly yes' }
        : aof === undefined
          ? {
              verdict: 'WARN',
              name: 'redis persistence',
              says: 'CONFIG is not allowed here: make sure your provider keeps data across restarts (AOF)',
            }
          : {
              verdict: 'WARN',
              name: 'redis persistence',
              says: save
                ? 'snapshots only: jobs queued since the last one are lost on a restart; set appendonly yes'
                : 'none: a Redis restart loses every queued job; set appendonly yes (appendfsync everysec)',
            },
    );
    return checks;
  } finally {
    redis.disconnect();
  }
}

/** One request with the configured key: 200 or 404 means the API took it. */
async function apiCheck(config: Config): Promise<Check> {
  if (config.api === undefined || config.api.baseUrl === '' || config.api.apiKey === '') {
    return {
      verdict: 'WARN',
      name: 'api key',
      says: 'CARDS_API_BASE_URL and CARDS_API_KEY (or CARDS_API_KEY_FILE) are not both set: nothing can sync',
    };
  }
  const api = createApiClient(config.api, { connections: 1 });
  try {
    const outcome = await api.fetchCards({ subscriberId: 1 });
    switch (outcome.kind) {
      case 'ok':
      case 'not_found':
        return {
          verdict: 'ok',
          name: 'api key',
          says: `accepted by ${new URL(config.api.baseUrl).host} (HTTP ${outcome.status})`,
        };
      case 'auth_rejected':
        return {
          verdict: 'FAIL',
          name: 'api key',
          says: `rejected (HTTP ${outcome.status}): fix CARDS_API_KEY or the file CARDS_API_KEY_FILE names`,
        };
      case 'rate_limited':
        return {
          verdict: 'WARN',
          name: 'api key',
          says: 'the API answered 429: not checked, try again later',
        };
      case 'transient':
        return {
          verdict: 'FAIL',
          name: 'api key',
          says: `cannot reach the API (${outcome.code}): check CARDS_API_BASE_URL and the network`,
        };
      default:
        return {
          verdict: 'FAIL',
          name: 'api key',
          says: `the API answered HTTP ${outcome.status}: ${outcome.message}`,
        };
    }
  } finally {
    await api.close();
  }
}

/**
 * `cards-sync doctor`: configuration (already loaded and valid, or the command stopped with exit 2),
 * Postgres, migrations, the clock against Postgres's, Redis with its eviction policy and persistence,
 * the API key (one request), and tracing (whether the OTEL_* variables turn it on, and whether its
 * endpoint takes an export). One line per check, with the fix; exit 1 if any fails.
 */
export async function cmdDoctor(
  config: Config,
  io: Io,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const topology =
    config.redis.topology === 'single'
      ? 'one Redis node'
      : config.redis.topology === 'sentinel'
        ? 'Redis Sentinel'
        : 'Redis Cluster';
  const checks: Check[] = [
    {
      verdict: 'ok',
      name: 'config',
      says: `valid; ${topology}, queue prefix ${config.queuePrefix}, ${config.syncRateLimitPerSec > 0 ? `${config.syncRateLimitPerSec} API requests/s` : 'no rate limit'}`,
    },
    ...(await postgresChecks(config)),
    ...(await redisChecks(config)),
    await apiCheck(config),
    await tracingCheck(env),
  ];
  for (const c of checks) io.out(`${c.verdict.padEnd(4)}  ${c.name.padEnd(17)}  ${c.says}`);
  io.out(doctorSummary(checks));
  return checks.some((c) => c.verdict === 'FAIL') ? 1 : 0;
}

/** The last line of `doctor`: failures first; a pass with warnings says so rather than "every check passed". */
export function doctorSummary(checks: readonly { verdict: Verdict }[]): string {
  const count = (n: number, one: string) => `${n} ${one}${n === 1 ? '' : 's'}`;
  const failed = checks.filter((c) => c.verdict === 'FAIL').length;
  const warned = checks.filter((c) => c.verdict === 'WARN').length;
  if (failed > 0) return `doctor: ${count(failed, 'check')} failed`;
  return warned > 0 ? `doctor: passed, with ${count(warned, 'warning')}` : 'doctor: every check passed';
}
