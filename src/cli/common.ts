import { rootCause } from '../../db/errors.js';
import { lastRedisError, type RedisClient } from '../../jobs/redis.js';
import type { Config, HostPort, RedisConfig } from '../config/index.js';
import { CliError } from '../shared/index.js';

/** Where a command writes; tests pass their own. */
export interface Io {
  env: Record<string, string | undefined>;
  out: (line: string) => void;
  err: (line: string) => void;
  /** Standard input, for `--file -`. Default `process.stdin`. */
  stdin?: import('node:stream').Readable;
  /** Whether standard error is a terminal (progress bars). Default false. */
  isTTY?: boolean;
  /** Whether standard output is a terminal (`token` refuses one). Default false. */
  stdoutIsTTY?: boolean;
}

/** What a `registerX` (src/cli/register-*.ts) needs to add its commands to the program. */
export interface CliDeps {
  io: Io;
  /** Where an action leaves its exit code. */
  state: { exitCode: number };
  /** The configuration, the refresh's settings included: for a command that runs or plans the refresh. */
  config: () => Config;
  /** The configuration for a command that does not run the refresh: a bad REFRESH_* setting is warned about and passed over. */
  configWithoutRefresh: () => Config;
}

function where(url: string, fallbackPort: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || fallbackPort}`;
  } catch {
    return 'the configured address';
  }
}

/** A one-line, actionable explanation of a Postgres error, or undefined when it is not a known kind. */
export function describeDbError(error: unknown, databaseUrl: string): string | undefined {
  const code = rootCause(error).code;
  const name = URL.parse(databaseUrl)?.pathname ?? '';
  const pg = `Postgres at ${where(databaseUrl, '5432')}${name}`;
  if (code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'ETIMEDOUT' || code === 'EAI_AGAIN') {
    return `cannot reach ${pg} (${code}); start it (docker compose up -d postgres) or set DATABASE_URL`;
  }
  if (code === '3D000') return `${pg} does not exist; run \`cards-sync migrate\` first`;
  if (code === '42P01') return `the tables are missing in ${pg}; run \`cards-sync migrate\` first`;
  if (code === '28P01') return `${pg} refused the login; check the user and password in DATABASE_URL`;
  // pg_hba.conf said no (e.g. "no encryption": add sslmode=verify-full to DATABASE_URL); the server's
  // own words say which rule, and hold no secret.
  if (code === '28000')
    return `${pg} refused the connection: ${rootCause(error).message}; check pg_hba.conf and the sslmode in DATABASE_URL`;
  return undefined;
}

/** Fails fast, with the fix, when Redis does not answer. */
export async function ensureRedis(redis: RedisClient, target: RedisConfig): Promise<void> {
  try {
    await redis.ping();
  } catch (error) {
    const code = lastRedisError(redis) ?? (error as { code?: string }).code ?? (error as Error).message;
    const list = (nodes: HostPort[] | undefined) => (nodes ?? []).map((n) => `${n.host}:${n.port}`).join(',');
    const what =
      target.topology === 'sentinel'
        ? `the Redis master "${target.sentinelName}" through the Sentinels at ${list(target.sentinels)} (${code}); check REDIS_SENTINELS and REDIS_SENTINEL_NAME`
        : target.topology === 'cluster'
          ? `the Redis Cluster at ${list(target.clusterNodes)} (${code}); check REDIS_CLUSTER_NODES`
          : `Redis at ${where(target.url, '6379')} (${code}); start it (docker compose up -d redis) or set REDIS_URL`;
    throw new CliError(`cannot reach ${what}`, 1);
  }
}
