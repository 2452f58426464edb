import { knownMigration } from '../../db/migrate.js';
import type { Config } from '../config/index.js';
import { packageVersion } from '../shared/index.js';
import type { FleetRole, ProcessInfo } from './registry.js';
import { sharedSettings } from './shared-settings.js';

/**
 * What this process tells the fleet: its release, the newest migration it knows, its key ids, and
 * the settings that only work when every process shares them (src/fleet/shared-settings.ts: each
 * variable declared `fleet: 'shared'`, such as SYNC_RATE_LIMIT_PER_SEC, a limit per process however
 * "across all workers" it is meant, or REFRESH_MAX_AGE, within which each worker reschedules the
 * subscribers it syncs).
 */
export function thisProcess(config: Config, role: FleetRole, concurrency: number | null): ProcessInfo {
  return {
    role,
    version: packageVersion(),
    knownMigration: knownMigration(),
    keyIds: config.tokens.ring?.ids ?? [],
    concurrency,
    settings: sharedSettings(config),
  };
}
