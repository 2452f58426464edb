import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type pg from 'pg';
import { deleteProcess, forgetGoneProcesses, liveProcessRows, upsertProcess } from '../../db/fleet/index.js';
import { settingsByVariable } from './shared-settings.js';

// The fleet registry: every long-running process says who it is in `fleet_processes`
// and beats every few seconds; one that stops beating drops out after LIVE_FOR_MS, one that stops
// cleanly leaves at once. `status`, the overview and /metrics read it; an upgrade reads which
// releases, migrations and keys the live processes have. The statements are db/fleet/processes.ts's.

/** How often a process beats: a row update every 4 s per process, next to nothing beside the syncs. */
const BEAT_MS = 4_000;
/**
 * A process whose last beat is older than this is gone (three beats missed, and some): a SIGKILLed
 * worker leaves `status` within about 15 s, near when the refresh's lease line says nobody holds it.
 */
const LIVE_FOR_MS = 15_000;

export type FleetRole = 'worker' | 'admin' | 'worker+admin';

/** What a process tells the fleet about itself. */
export interface ProcessInfo {
  role: FleetRole;
  version: string;
  /** The newest migration its release ships. */
  knownMigration: string;
  /** The ids of the keys in its card-token ring (never the keys). */
  keyIds: string[];
  concurrency: number | null;
  /**
   * The settings every process must share, by variable name (src/fleet/shared-settings.ts); a
   * process of an older release may lack some.
   */
  settings: Record<string, unknown>;
}

/** One live process, as `status --json` (`fleet`) shows it. */
export interface FleetEntry extends ProcessInfo {
  id: string;
  host: string;
  pid: number;
  startedAt: string;
  lastBeatAt: string;
}

export interface FleetMembership {
  id: string;
  /** Stops beating and removes the row: the process leaves the fleet at once. */
  leave(): Promise<void>;
}

/**
 * Registers this process and beats every `beatMs` until `leave()`; `onBeat` runs after each beat
 * (a worker checks there for a breaking migration newer than it knows). A beat that finds its row gone
 * (deleted as forgotten after a long outage) writes it again. A failed beat is retried at the next
 * one: the registry reports, it never stops a process.
 */
export async function joinFleet(
  pool: pg.Pool,
  info: ProcessInfo,
  o: { beatMs?: number; onError?: (error: Error) => void; onBeat?: () => Promise<void> } = {},
): Promise<FleetMembership> {
  const id = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  const upsert = () =>
    upsertProcess(pool, {
      id,
      role: info.role,
      host: hostname(),
      pid: process.pid,
      version: info.version,
      knownMigration: info.knownMigration,
      keyIds: info.keyIds,
      concurrency: info.concurrency,
      settings: info.settings,
    });
  await forgetGoneProcesses(pool);
  await upsert();
  let beating: Promise<unknown> = Promise.resolve();
  const timer = setInterval(() => {
    beating = upsert()
      .then(() => o.onBeat?.())
      .catch((error: Error) => o.onError?.(error));
  }, o.beatMs ?? BEAT_MS);
  timer.unref();
  let left: Promise<void> | undefined;
  return {
    id,
    leave() {
      left ??= (async () => {
        clearInterval(timer);
        await beating;
        await deleteProcess(pool, id).catch(() => {});
      })();
      return left;
    },
  };
}

/** The live processes: those that beat within `liveForMs`, oldest first. */
export async function liveFleet(pool: pg.Pool, liveForMs = LIVE_FOR_MS): Promise<FleetEntry[]> {
  const rows = await liveProcessRows(pool, liveForMs);
  return rows.map((r) => ({
    id: r.id,
    role: r.role as FleetRole,
    host: r.host,
    pid: r.pid,
    version: r.version,
    knownMigration: r.known_migration,
    keyIds: r.key_ids,
    concurrency: r.concurrency,
    settings: settingsByVariable(r.settings),
    startedAt: r.started_at.toISOString(),
    lastBeatAt: r.last_beat_at.toISOString(),
  }));
}

/** The live processes counted by (version, role): what /metrics exports. */
export function fleetCounts(
  fleet: readonly FleetEntry[],
): { version: string; role: string; count: number }[] {
  const counts = new Map<string, { version: string; role: string; count: number }>();
  for (const p of fleet) {
    const key = `${p.version}\u0000${p.role}`;
    const c = counts.get(key) ?? { version: p.version, role: p.role, count: 0 };
    c.count += 1;
    counts.set(key, c);
  }
  return [...counts.values()];
}
