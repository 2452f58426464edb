import pg from 'pg';
import {
  dockerReachable,
  startPostgresContainer,
  startRedisContainer,
} from '../../../src/demo/containers.js';
import {
  findPostgresBin,
  findRedisServer,
  redisAnswers,
  startLocalPostgres,
  startLocalRedis,
} from '../../../src/demo/local-servers.js';

/** The services a test run talks to, and how to stop any it started. */
export interface TestServices {
  /** A URL of the server's maintenance database (`postgres`). */
  postgresUrl: string;
  redisUrl: string;
  stop(): Promise<void>;
}

const LOCAL_POSTGRES = 'postgres://postgres:postgres@127.0.0.1:5432/postgres';
const LOCAL_REDIS = 'redis://127.0.0.1:6379';

async function postgresAnswers(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

async function redisUrlAnswers(url: string): Promise<boolean> {
  const { hostname, port, password } = new URL(url);
  return redisAnswers(
    hostname,
    Number(port || 6379),
    2000,
    password ? decodeURIComponent(password) : undefined,
  );
}

const HOW_TO =
  'Tests need PostgreSQL 15 and Redis 7. Either set TEST_DATABASE_URL and TEST_REDIS_URL, ' +
  'or run them locally on 127.0.0.1:5432 (user postgres) and 127.0.0.1:6379 ' +
  '(`docker compose up -d postgres redis` does that), or install them (private ones are started from ' +
  'their binaries), or make a Docker engine reachable for testcontainers.';

/**
 * Finds the services in this order: `TEST_DATABASE_URL`/`TEST_REDIS_URL`; the local services on
 * their default ports; private ones started from the installed binaries (initdb/pg_ctl,
 * redis-server); testcontainers when Docker answers; else one clear message.
 */
export async function resolveServices(
  env: Record<string, string | undefined> = process.env,
  local = { postgres: LOCAL_POSTGRES, redis: LOCAL_REDIS },
): Promise<TestServices> {
  const stops: (() => Promise<unknown>)[] = [];
  let postgresUrl = env.TEST_DATABASE_URL;
  let redisUrl = env.TEST_REDIS_URL;
  if (postgresUrl !== undefined && !(await postgresAnswers(postgresUrl))) {
    throw new Error(`TEST_DATABASE_URL is set but Postgres does not answer there. ${HOW_TO}`);
  }
  if (redisUrl !== undefined && !(await redisUrlAnswers(redisUrl))) {
    throw new Error(`TEST_REDIS_URL is set but Redis does not answer there. ${HOW_TO}`);
  }
  if (postgresUrl === undefined && (await postgresAnswers(local.postgres))) postgresUrl = local.postgres;
  if (redisUrl === undefined && (await redisUrlAnswers(local.redis))) redisUrl = local.redis;
  // Installed but not running: private ones from the binaries, as the demo starts them.
  try {
    const postgresBin = postgresUrl === undefined ? findPostgresBin() : undefined;
    if (postgresBin !== undefined) {
      const server = await startLocalPostgres(postgresBin);
      stops.push(server.stop);
      postgresUrl = server.url;
    }
    const redisBin = redisUrl === undefined ? findRedisServer() : undefined;
    if (redisBin !== undefined) {
      const server = await startLocalRedis(redisBin);
      stops.push(server.stop);
      redisUrl = server.url;
    }
  } catch (error) {
    await Promise.allSettled(stops.map((s) => s()));
    throw error;
  }
  if ((postgresUrl === undefined || redisUrl === undefined) && (await dockerReachable())) {
    if (postgresUrl === undefined) {
      const container = await startPostgresContainer();
      stops.push(container.stop);
      postgresUrl = container.url;
    }
    if (redisUrl === undefined) {
      const container = await startRedisContainer();
      stops.push(container.stop);
      redisUrl = container.url;
    }
  }
  if (postgresUrl === undefined || redisUrl === undefined) {
    const missing = [postgresUrl === undefined ? 'Postgres' : '', redisUrl === undefined ? 'Redis' : '']
      .filter(Boolean)
      .join(' and ');
    throw new Error(`${missing} not found. ${HOW_TO}`);
  }
  return {
    postgresUrl,
    redisUrl,
    stop: async () => {
      await Promise.all(stops.map((s) => s()));
    },
  };
}
