import { rootCause } from '../../db/errors.js';
import { checkPool } from '../../db/server.js';
import type { Config } from '../config/index.js';
import { describeDisagreement, fleetDisagreements, liveFleet, workersLacking } from '../fleet/index.js';

// `cards-sync doctor`'s fleet check: one first key every live worker holds, and the
// settings the processes must share.

export interface FleetCheck {
  verdict: 'ok' | 'WARN';
  name: 'fleet';
  says: string;
}

/** Whether the live fleet agrees: one primary key every worker holds, and the shared settings. */
export async function fleetCheck(config: Config): Promise<FleetCheck> {
  const pool = checkPool(config.databaseUrl);
  try {
    const fleet = await liveFleet(pool);
    if (fleet.length === 0) return { verdict: 'ok', name: 'fleet', says: 'no live process registered' };
    // The keys new tokens are sealed under: each live process's first, and this configuration's.
    const own = config.tokens.encryption === 'on' ? config.tokens.ring?.primaryId : undefined;
    const primaries = [
      ...new Set([
        ...fleet.filter((p) => p.keyIds.length > 0).map((p) => p.keyIds[0]!),
        ...(own ? [own] : []),
      ]),
    ];
    const lacking = primaries.flatMap((k) => workersLacking(fleet, k).map((p) => `${p.id} lacks ${k}`));
    const differ = fleetDisagreements(fleet).map(describeDisagreement);
    const releases = [...new Set(fleet.map((p) => p.version))].join(', ');
    const summary = `${fleet.length} live (${releases})`;
    if (lacking.length > 0 || differ.length > 0) {
      return {
        verdict: 'WARN',
        name: 'fleet',
        says:
          `${summary}; ${lacking.length > 0 ? `key rings disagree: ${lacking.join('; ')}` : 'key rings agree'}` +
          `${differ.length > 0 ? `; settings differ: ${differ.join('; ')} (see cards-sync status)` : ''}`,
      };
    }
    return {
      verdict: 'ok',
      name: 'fleet',
      says: `${summary}; key rings agree (first key ${primaries.join(', ') || 'none'}), shared settings agree`,
    };
  } catch (error) {
    return { verdict: 'WARN', name: 'fleet', says: `cannot read the fleet: ${rootCause(error).message}` };
  } finally {
    await pool.end().catch(() => {});
  }
}
