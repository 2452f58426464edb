import { createDb } from '../../db/client.js';
import { createRedis } from '../../jobs/redis.js';
import { createRefreshQueue } from '../../jobs/refresh/index.js';
import { createSyncQueue } from '../../jobs/sync/index.js';
import type { Config } from '../config/index.js';
import { joinFleet, thisProcess } from '../fleet/index.js';
import type { Logger } from '../logging/index.js';
import type { Metrics } from '../metrics/index.js';
import { CliError } from '../shared/index.js';
import { createAdminApp } from './app.js';

/** Starts the admin server on ADMIN_HOST:ADMIN_PORT; returns its URL and how to stop it. */
export async function startAdmin(
  config: Config,
  shared: { logger: Logger; metrics: Metrics },
  listen: { host?: string; port?: number } = {},
  /** Registers the server in the fleet as `admin` (a worker with --admin registers itself). */
  joinsFleet = false,
): Promise<{ url: string; stop(): Promise<void> }> {
  const redis = createRedis(config.redis, { blocking: true });
  const syncQueue = createSyncQueue(redis, { prefix: config.queuePrefix, attempts: config.syncAttempts });
  const refreshQueue = createRefreshQueue(redis, config.queuePrefix);
  const handle = createDb(config.databaseUrl, {
    max: 4,
    applicationName: 'cards-sync admin',
    timeoutMs: config.databaseTimeoutMs,
  });
  const admin = createAdminApp({
    db: handle.db,
    redis,
    syncQueue,
    refreshQueue,
    metrics: shared.metrics,
    logger: shared.logger,
    adminToken: config.adminToken,
    adminReadToken: config.adminReadToken,
    prefix: config.queuePrefix,
    changeEventsRetentionDays: config.changeEventsRetentionDays,
    refreshMaxAgeMs: config.refreshMaxAgeMs,
  });
  const host = listen.host ?? config.adminHost;
  const port = listen.port ?? config.adminPort;
  let url: string;
  try {
    url = await admin.start(port, host);
  } catch (error) {
    await Promise.allSettled([syncQueue.close(), refreshQueue.close(), handle.close()]);
    redis.disconnect();
    throw new CliError(`the admin server cannot listen on ${host}:${port}: ${(error as Error).message}`, 1);
  }
  const fleet = joinsFleet
    ? await joinFleet(handle.pool, thisProcess(config, 'admin', null), {
        onError: (error) =>
          shared.logger.warn({ err: error.message }, 'fleet heartbeat failed; retrying at the next beat'),
      })
    : undefined;
  shared.logger.info(
    {
      url,
      writeRoutes: config.adminToken ? 'on' : 'off (no ADMIN_TOKEN)',
      readToken: config.adminReadToken ? 'on' : 'off (no ADMIN_READ_TOKEN)',
    },
    'admin server listening',
  );
  return {
    url,
    async stop() {
      await fleet?.leave();
      await admin.stop();
      await Promise.allSettled([syncQueue.close(), refreshQueue.close(), handle.close()]);
      redis.disconnect();
    },
  };
}
