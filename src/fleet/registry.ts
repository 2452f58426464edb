import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type pg from 'pg';
import { settingsByVariable } from './shared-settings.js';

// The fleet registry: every long-running process says who it is in `fleet_processes`
// and beats every few seconds; one that stops beating drops out after LIVE_FOR_MS, one that stops
// cleanly leaves at once. `status`, the overview and /metrics read it; an upgrade reads which
// releases, migrations and keys the live processes have.

/** How often a process beats. */
const BEAT_MS = 10_000;
/** A process whose last beat is older than this is gone (three beats missed, and some). */
const LIVE_FOR_MS = 45_000;
/** Rows of processes gone longer than this are deleted by the next process that joins. */
const FORGET_AFTER = '1 day';

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
    pool.query(
      `insert into fleet_processes (id, role, host, pid, version, known_migration, key_ids, concurrency, settings)
        values ($1, $2, $3, $4, $5, $6, $7, $8, $9)
        on conflict (id) do update set last_beat_at = now()`,
      [
        id,
        info.role,
        hostname(),
        process.pid,
        info.version,
        info.knownMigration,
        info.keyIds,
        info.concurrency,
        JSON.stringify(info.settings),
      ],
    );
  await pool.query(`delete from fleet_processes where last_beat_at < now() - interval '${FORGET_AFTER}'`);
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
        await pool.query('delete from fleet_processes where id = $1', [id]).catch(() => {});
      })();
      return left;
    },
  };
}

/** The live processes: those that beat within `liveForMs`, oldest first. */
export async function liveFleet(pool: pg.Pool, liveForMs = LIVE_FOR_MS): Promise<FleetEntry[]> {
  const { rows } = await pool.query<{
    id: string;
    role: FleetRole;
    host: string;
    pid: number;
    version: string;
    known_migration: string;
    key_ids: string[];
    concurrency: number | null;
    settings: Record<string, unknown>;
    started_at: Date;
    last_beat_at: Date;
  }>(
    `select * from fleet_processes where last_beat_at > now() - make_interval(secs => $1)
      order by started_at, id`,
    [liveForMs / 1000],
  );
  return rows.map((r) => ({
    id: r.id,
    role: r.role,
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
