// Throwaway Postgres and Redis in Docker, through testcontainers: what the demo and the tests fall
// back on when nothing answers locally. testcontainers is a development dependency, so an install
// without it (the production image) simply has no Docker fallback.

export interface Started {
  url: string;
  stop(): Promise<unknown>;
}

/** True when a Docker engine answers (and testcontainers is installed). */
export async function dockerReachable(): Promise<boolean> {
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    await getContainerRuntimeClient();
    return true;
  } catch {
    return false;
  }
}

/** Postgres 15; the URL names its maintenance database `postgres`. */
export async function startPostgresContainer(): Promise<Started> {
  const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
  const container = await new PostgreSqlContainer('postgres:15-alpine').withDatabase('postgres').start();
  return { url: container.getConnectionUri(), stop: () => container.stop() };
}

/** Redis 7 with the eviction policy BullMQ needs. */
export async function startRedisContainer(): Promise<Started> {
  const { RedisContainer } = await import('@testcontainers/redis');
  const container = await new RedisContainer('redis:7-alpine')
    .withCommand(['redis-server', '--maxmemory-policy', 'noeviction'])
    .start();
  return { url: container.getConnectionUrl(), stop: () => container.stop() };
}
