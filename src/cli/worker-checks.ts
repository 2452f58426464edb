import { breakingAhead, tooOldMessage } from '../../db/breaking.js';
import { createDb } from '../../db/client.js';
import { sampledTokenKeys } from '../../db/tokens/index.js';
import type { Config } from '../config/index.js';
import {
  type FleetEntry,
  liveFleet,
  nameProcesses,
  showSetting,
  thisProcess,
  workersLacking,
} from '../fleet/index.js';
import type { Logger } from '../logging/index.js';
import { CliError, packageVersion } from '../shared/index.js';

// What a worker checks against the database and the live fleet before it takes a job:
// refusals (exit 3: a release older than the newest breaking migration; exit 2: a first key some
// live worker lacks) and warnings (stored tokens under a key the ring lacks, shared settings that
// differ from the fleet's).

/** Throws a CliError (exit 3 or 2) when this worker must not start; logs what it should know. */
export async function checkBeforeStart(config: Config, logger: Logger, known: string): Promise<void> {
  // A release older than the database's newest breaking migration must not write (exit 3).
  const check = createDb(config.databaseUrl, { max: 1, timeoutMs: config.databaseTimeoutMs });
  let ahead: string | undefined;
  let fleetNow: FleetEntry[] = [];
  try {
    ahead = await breakingAhead(check.pool, known);
    fleetNow = ahead === undefined ? await liveFleet(check.pool).catch(() => []) : [];
  } finally {
    await check.close();
  }
  if (ahead !== undefined) throw new CliError(tooOldMessage(packageVersion(), known, ahead), 3);
  // Sealing under a key some live worker lacks would make its syncs fail (token_key_unknown).
  const primary = config.tokens.encryption === 'on' ? config.tokens.ring?.primaryId : undefined;
  const lacking = primary === undefined ? [] : workersLacking(fleetNow, primary);
  if (lacking.length > 0) {
    throw new CliError(
      `CARD_TOKEN_KEYS's first key ${primary} is not in the ring of ${lacking.length} live worker${lacking.length === 1 ? '' : 's'}: ` +
        `${nameProcesses(lacking)}. Give every worker a ring that holds ${primary} (second), then make it first`,
      2,
    );
  }
  // Tokens sealed under a key this ring lacks cannot be compared: say so now, not sync by sync.
  // A sample of pages (a whole scan could take minutes on a large table); doctor counts them all.
  if (config.tokens.ring !== undefined) {
    const ring = config.tokens.ring;
    const sample = createDb(config.databaseUrl, { max: 1, timeoutMs: config.databaseTimeoutMs });
    try {
      const missing = (await sampledTokenKeys(sample.pool)).filter((k) => k !== '' && !ring.ids.includes(k));
      if (missing.length > 0) {
        logger.warn(
          { missing, ring: ring.ids },
          `stored card tokens are sealed under key${missing.length === 1 ? '' : 's'} ${missing.join(', ')}, ` +
            'which CARD_TOKEN_KEYS lacks: syncs of those cards fail with token_key_unknown until the ring holds ' +
            `${missing.length === 1 ? 'it' : 'them'} (cards-sync doctor counts them)`,
        );
      }
    } catch {
      // A sample that cannot be read says nothing; the syncs will.
    } finally {
      await sample.close();
    }
  }
  // Settings that work only when shared: say which differ (a rolling change passes through this).
  for (const line of settingsDiffer(thisProcess(config, 'worker', null).settings, fleetNow)) {
    logger.warn(line.detail, line.message);
  }
}

/**
 * The start's warnings about shared settings: `REFRESH_MAX_AGE is 1s here, 2m on 3 live processes:
 * every process must share it`. Compared with the live workers that publish the setting.
 */
function settingsDiffer(
  mine: Record<string, unknown>,
  fleet: readonly FleetEntry[],
): { message: string; detail: Record<string, unknown> }[] {
  const out: { message: string; detail: Record<string, unknown> }[] = [];
  for (const [setting, value] of Object.entries(mine)) {
    const here = showSetting(value);
    const others = fleet.filter(
      (p) => p.role !== 'admin' && setting in p.settings && showSetting(p.settings[setting]) !== here,
    );
    if (others.length === 0) continue;
    const byValue = new Map<string, number>();
    for (const p of others) {
      const v = showSetting(p.settings[setting]);
      byValue.set(v, (byValue.get(v) ?? 0) + 1);
    }
    const there = [...byValue].map(([v, n]) => `${v} on ${n} live process${n === 1 ? '' : 'es'}`).join(', ');
    out.push({
      message: `${setting} is ${here} here, ${there}: every process must share it`,
      detail: {
        setting,
        value,
        fleet: others.map((p) => ({ id: p.id, value: p.settings[setting] ?? null })),
      },
    });
  }
  return out;
}
