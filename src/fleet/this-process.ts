import { knownMigration } from '../../db/migrate.js';
import type { Config } from '../config/index.js';
import { packageVersion } from '../version.js';
import type { FleetRole, ProcessInfo } from './registry.js';

/**
 * What this process tells the fleet: its release, the newest migration it knows, its key ids, and
 * the settings that only work when every process shares them (`SYNC_RATE_LIMIT_PER_SEC` is a
 * limit per process, however "across all workers" it is meant: one worker without it spends
 * without one; the refresh mode and budget; the queue prefix, which names the queue itself).
 */
export function thisProcess(config: Config, role: FleetRole, concurrency: number | null): ProcessInfo {
  return {
    role,
    version: packageVersion(),
    knownMigration: knownMigration(),
    keyIds: config.tokens.ring?.ids ?? [],
    concurrency,
    settings: {
      rateLimitPerSec: config.syncRateLimitPerSec,
      refreshMode: config.refreshMode,
      refreshBudgetPerSec: config.refreshMode === 'continuous' ? config.refreshBudgetPerSec : null,
      queuePrefix: config.queuePrefix,
      redisTopology: config.redis.topology,
    },
  };
}
