import type { Db } from '../../db/client.js';
import type { RedisClient } from '../../jobs/redis.js';
import type { createRefreshQueue } from '../../jobs/refresh/index.js';
import type { createSyncQueue } from '../../jobs/sync/index.js';
import { DEFAULT_REFRESH_MAX_AGE_MS } from '../config/index.js';
import type { Logger } from '../logging/index.js';
import type { Metrics } from '../metrics/index.js';

// What the admin app and each of its route files are given: its own module so the route files
// need not import the app that mounts them.

/** The admin app's services and settings. */
export interface AdminDeps {
  db: Db;
  redis: RedisClient;
  syncQueue: ReturnType<typeof createSyncQueue>;
  refreshQueue: ReturnType<typeof createRefreshQueue>;
  metrics: Metrics;
  logger: Logger;
  /** `ADMIN_TOKEN`, the operator's: may look and act. Without it, nobody acts. */
  adminToken: string | undefined;
  /**
   * `ADMIN_READ_TOKEN`, the reader's: may look (pages, reads, a read-only Bull Board) but not act.
   * Default unset. With neither token, every route but health, readiness and metrics is off.
   */
  adminReadToken?: string | undefined;
  /** BullMQ prefix, for status. */
  prefix: string;
  /** `REFRESH_MAX_AGE`: how long a new subscriber's enqueued job has before the refresh takes it. Default 7 days. */
  refreshMaxAgeMs?: number;
  /** `CHANGE_EVENTS_RETENTION_DAYS`: webhook endpoints whose waiting events near it are flagged. Default 30. */
  changeEventsRetentionDays?: number;
}

/** REFRESH_MAX_AGE as this process has it (the default where the app was built without it). */
export function maxAgeOf(deps: Pick<AdminDeps, 'refreshMaxAgeMs'>): number {
  return deps.refreshMaxAgeMs ?? DEFAULT_REFRESH_MAX_AGE_MS;
}
