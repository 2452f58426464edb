import type { DbHandle } from '../db/client.js';
import { createRefreshQueue } from '../jobs/refresh.js';
import { createAdminApp } from '../src/admin/app.js';
import { collectGauges } from '../src/admin/scrape.js';
import { createMetrics } from '../src/metrics.js';
import { ADMIN_TOKEN } from './fixtures.js';
import { captureLogger } from './helpers.js';
import type { testQueue } from './queue-helpers.js';

/**
 * The admin app over a test's database and queue, fetched as the operator: `get('/metrics')`,
 * `get('/admin')`. Its refresh queue is closed at cleanup.
 */
export function adminFor(
  database: { handle: DbHandle },
  q: ReturnType<typeof testQueue>,
  cleanups: (() => Promise<unknown>)[],
): (path: string) => Promise<string> {
  const refreshQueue = createRefreshQueue(q.redis, q.prefix);
  cleanups.push(() => refreshQueue.close());
  const admin = createAdminApp({
    db: database.handle.db,
    redis: q.redis,
    syncQueue: q.queue,
    refreshQueue,
    metrics: createMetrics({ defaultMetrics: false }),
    logger: captureLogger().logger,
    adminToken: ADMIN_TOKEN,
    prefix: q.prefix,
  });
  const headers = { authorization: `Bearer ${ADMIN_TOKEN}` };
  return async (path) => (await admin.app.fetch(new Request(`http://x${path}`, { headers }))).text();
}

/**
 * What `/metrics` says of the database alone (the webhook gauges, freshness): the scrape-time
 * gauges collected with Redis and the queue refusing, as when they do not answer.
 */
export async function databaseGauges(db: DbHandle['db']): Promise<string> {
  const metrics = createMetrics({ defaultMetrics: false });
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
