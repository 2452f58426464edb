import type { Logger } from 'pino';
import type { DbHandle } from '../../db/client.js';
import { createRefreshQueue } from '../../jobs/refresh/index.js';
import { createAdminApp } from '../../src/admin/app.js';
import { collectGauges } from '../../src/admin/scrape.js';
import { createMetrics } from '../../src/metrics/index.js';
import { ADMIN_TOKEN } from './fixtures.js';
import { captureLogger } from './helpers.js';
import type { testQueue } from './queue-helpers.js';

export interface TestAdminOptions {
  /** Default a logger whose lines are kept in memory. */
  logger?: Logger;
  /** Default {@link ADMIN_TOKEN}. */
  adminToken?: string;
  /** Default none. */
  adminReadToken?: string;
  /** `REFRESH_MAX_AGE` as the process has it. Default none (the app's own default, 7 days). */
  refreshMaxAgeMs?: number;
}

/**
 * The admin app over a test's database and queue, as `cards-sync admin` builds it, with a refresh
 * queue of its own; `close` closes that queue (the app itself holds nothing until it listens).
 */
export function testAdminApp(
  database: { handle: DbHandle },
  q: ReturnType<typeof testQueue>,
  options: TestAdminOptions = {},
) {
  const refreshQueue = createRefreshQueue(q.redis, q.prefix);
  const admin = createAdminApp({
    db: database.handle.db,
    redis: q.redis,
    syncQueue: q.queue,
    refreshQueue,
    metrics: createMetrics({ defaultMetrics: false }),
    logger: options.logger ?? captureLogger().logger,
    adminToken: options.adminToken ?? ADMIN_TOKEN,
    adminReadToken: options.adminReadToken,
    prefix: q.prefix,
    ...(options.refreshMaxAgeMs !== undefined ? { refreshMaxAgeMs: options.refreshMaxAgeMs } : {}),
  });
  return { admin, close: () => refreshQueue.close() };
}

/** {@link testAdminApp} listening on a loopback port, as a browser opens it; `stop` closes both. */
export async function servedAdmin(
  database: { handle: DbHandle },
  q: ReturnType<typeof testQueue>,
  options: TestAdminOptions = {},
): Promise<{ url: string; stop: () => Promise<void> }> {
  const { admin, close } = testAdminApp(database, q, options);
  const url = await admin.start(0, '127.0.0.1');
  return {
    url,
    stop: async () => {
      await admin.stop();
      await close();
    },
  };
}

/**
 * The admin app over a test's database and queue, fetched as the operator: `get('/metrics')`,
 * `get('/admin')`. Its refresh queue is closed at cleanup.
 */
export function adminFor(
  database: { handle: DbHandle },
  q: ReturnType<typeof testQueue>,
  cleanups: (() => Promise<unknown>)[],
  options: TestAdminOptions = {},
): (path: string) => Promise<string> {
  const { admin, close } = testAdminApp(database, q, options);
  cleanups.push(close);
  const headers = { authorization: `Bearer ${ADMIN_TOKEN}` };
  return async (path) => (await admin.app.fetch(new Request(`http://x${path}`, { headers }))).text();
}

/**
 * What `/metrics` says of the database alone (the webhook gauges, freshness): the scrape-time
 * gauges collected with Redis and the queue refusing, as when they do not answer.
 */
export async function databaseGauges(
  db: DbHandle['db'],
  metrics = createMetrics({ defaultMetrics: false }),
): Promise<string> {
  const refuse = () => Promise.reject(new Error('no queue here'));
  await collectGauges({
    db,
    metrics,
    redis: { exists: refuse } as never,
    syncQueue: {
      opts: { prefix: 'x' },
      getJobCounts: refuse,
      isPaused: refuse,
      getWorkersCount: refuse,
    } as never,
  });
  return metrics.registry.metrics();
}
