import pg from 'pg';
import { withDatabase } from '../../db/databases.js';
import { createRedis } from '../../jobs/redis.js';
import { ensureRedis } from '../commands/common.js';
import type { RedisConfig } from '../config/redis.js';
import { dockerReachable, type Started, startPostgresContainer, startRedisContainer } from './containers.js';

// Where the demo finds Postgres and Redis: what the environment names (or the local defaults);
// when a default does not answer and a Docker engine does, throwaway containers; otherwise one
// message per missing service and the command that starts them.

export const FIX = 'start them with `docker compose up -d postgres redis` (or set DATABASE_URL / REDIS_URL)';

export interface DemoServices {
  /** A Postgres server URL (its database part is replaced by the demo's own, unless told one). */
  postgresUrl: string;
  /** `REDIS_URL` to use instead of the configured one, when a container stands in. */
  redisUrl?: string;
  /** One line per container started, to print. */
  started: string[];
  stop(): Promise<void>;
}

export class ServicesMissing extends Error {
  constructor(readonly problems: string[]) {
    super(problems.join('; '));
  }
}

async function postgresProblem(url: string): Promise<string | undefined> {
  const u = new URL(url);
  const client = new pg.Client({
    connectionString: withDatabase(url, 'postgres'),
    connectionTimeoutMillis: 3000,
  });
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

/**
 * `explicit` says which of the two the user named (an environment variable or a flag): a named
 * service that does not answer is reported, never silently swapped for a container.
 */
export async function findServices(
  postgresUrl: string,
  redis: RedisConfig,
  explicit: { postgres: boolean; redis: boolean },
): Promise<DemoServices> {
  let [pgProblem, redisMissing] = await Promise.all([postgresProblem(postgresUrl), redisProblem(redis)]);
  const containers: Started[] = [];
  const started: string[] = [];
  const stop = async () => {
    await Promise.allSettled(containers.map((c) => c.stop()));
  };
  const result: DemoServices = { postgresUrl, started, stop };
  const replaceable = (pgProblem && !explicit.postgres) || (redisMissing && !explicit.redis);
  if (replaceable && (await dockerReachable())) {
    try {
      if (pgProblem && !explicit.postgres) {
        const c = await startPostgresContainer();
        containers.push(c);
        result.postgresUrl = c.url;
        started.push(
          `Postgres does not answer locally: started a throwaway one in Docker (${new URL(c.url).host})`,
        );
        pgProblem = undefined;
      }
      if (redisMissing && !explicit.redis) {
        const c = await startRedisContainer();
        containers.push(c);
        result.redisUrl = c.url;
        started.push(
          `Redis does not answer locally: started a throwaway one in Docker (${new URL(c.url).host})`,
        );
        redisMissing = undefined;
      }
    } catch (error) {
      await stop();
      throw error;
    }
  }
  const problems = [pgProblem, redisMissing].filter((p): p is string => p !== undefined);
  if (problems.length > 0) {
    await stop();
    throw new ServicesMissing(problems);
  }
  return result;
}
