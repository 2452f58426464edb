import { connectToServer } from '../../db/databases.js';
import { createRedis } from '../../jobs/redis.js';
import { ensureRedis } from '../cli/index.js';
import type { RedisConfig } from '../config/index.js';
import { dockerReachable, type Started, startPostgresContainer, startRedisContainer } from './containers.js';
import { findPostgresBin, findRedisServer, startLocalPostgres, startLocalRedis } from './local-servers.js';

// Where the demo finds Postgres and Redis: what the environment names (or the local defaults);
// when a default does not answer, a private throwaway one from the installed binaries or, without
// them, from a Docker engine; otherwise one message per missing service and the command that
// starts them.

export const FIX =
  'start them with `docker compose up -d postgres redis`, install PostgreSQL 15+ and Redis (the demo then starts private ones), or set DATABASE_URL / REDIS_URL';

export interface DemoServices {
  /** A Postgres server URL (its database part is replaced by the demo's own, unless told one). */
  postgresUrl: string;
  /** `REDIS_URL` to use instead of the configured one, when a private one stands in. */
  redisUrl?: string;
  /** Whether `postgresUrl` is a private server, removed with everything on it by `stop()`. */
  privatePostgres: boolean;
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
  try {
    await connectToServer(url, 3000);
    return undefined;
  } catch (error) {
    return `Postgres does not answer at ${u.hostname}:${u.port || 5432} (${(error as { code?: string }).code ?? (error as Error).message})`;
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

type Kind = 'Postgres' | 'Redis';

/**
 * A private server of `kind`: from the installed binaries (they start in a second and need no
 * image), else a Docker container. Throws with what was tried when neither can be had.
 */
async function standIn(kind: Kind): Promise<{ started: Started; how: string }> {
  const tried: string[] = [];
  const bin = kind === 'Postgres' ? findPostgresBin() : findRedisServer();
  if (bin) {
    try {
      const started = kind === 'Postgres' ? await startLocalPostgres(bin) : await startLocalRedis(bin);
      return { started, how: `from ${started.from}` };
    } catch (error) {
      tried.push(`its installed binaries failed (${(error as Error).message})`);
    }
  } else {
    tried.push(
      kind === 'Postgres'
        ? 'no PostgreSQL 15+ binaries (initdb, pg_ctl) installed'
        : 'no redis-server installed',
    );
  }
  if (await dockerReachable()) {
    const started = kind === 'Postgres' ? await startPostgresContainer() : await startRedisContainer();
    return { started, how: 'in Docker' };
  }
  tried.push('no Docker engine answers');
  throw new Error(tried.join('; '));
}

/**
 * `explicit` says which of the two the user named (an environment variable or a flag): a named
 * service that does not answer is reported, never silently swapped for a private one. With
 * `privateServers`, both are private ones whatever answers locally.
 */
export async function findServices(
  postgresUrl: string,
  redis: RedisConfig,
  explicit: { postgres: boolean; redis: boolean },
  privateServers = false,
): Promise<DemoServices> {
  const problems: Partial<Record<Kind, string>> = {};
  if (!privateServers) {
    const [pgProblem, redisMissing] = await Promise.all([postgresProblem(postgresUrl), redisProblem(redis)]);
    if (pgProblem) problems.Postgres = pgProblem;
    if (redisMissing) problems.Redis = redisMissing;
  }
  const servers: Started[] = [];
  const started: string[] = [];
  const stop = async () => {
    await Promise.allSettled(servers.map((c) => c.stop()));
  };
  const result: DemoServices = { postgresUrl, started, stop, privatePostgres: false };
  const wanted: Kind[] = privateServers
    ? ['Postgres', 'Redis']
    : (['Postgres', 'Redis'] as const).filter(
        (kind) => problems[kind] && !explicit[kind === 'Postgres' ? 'postgres' : 'redis'],
      );
  for (const kind of wanted) {
    try {
      const { started: server, how } = await standIn(kind);
      servers.push(server);
      if (kind === 'Postgres') {
        result.postgresUrl = server.url;
        result.privatePostgres = true;
      } else result.redisUrl = server.url;
      const why = privateServers ? 'as asked' : 'does not answer locally';
      started.push(
        `${kind} ${why}: started a private one ${how} (${new URL(server.url).host}), removed on exit`,
      );
      delete problems[kind];
    } catch (error) {
      const reason = `could not start a private ${kind}: ${(error as Error).message}`;
      problems[kind] = problems[kind] ? `${problems[kind]}; ${reason}` : reason;
    }
  }
  const left = Object.values(problems);
  if (left.length > 0) {
    await stop();
    throw new ServicesMissing(left);
  }
  return result;
}
