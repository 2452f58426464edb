import { lastRedisError, type RedisClient } from '../../jobs/redis.js';
import type { Config, HostPort, RedisConfig } from '../config/index.js';
import { CliError } from '../shared/index.js';
import { where } from './db-problem.js';

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
