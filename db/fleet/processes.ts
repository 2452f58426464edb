import type pg from 'pg';

// The statements of the fleet registry (`fleet_processes`; src/fleet/registry.ts beats with them).

/** Rows of processes gone longer than this are deleted by the next process that joins. */
const FORGET_AFTER = '1 day';

/** A process's row as it writes it. */
export interface ProcessRow {
  id: string;
  role: string;
  host: string;
  pid: number;
  version: string;
  knownMigration: string;
  keyIds: string[];
  concurrency: number | null;
  settings: Record<string, unknown>;
}

/** Writes a process's row, or beats (its `last_beat_at` now) when it is there already. */
export async function upsertProcess(pool: pg.Pool, p: ProcessRow): Promise<void> {
  await pool.query(
    `insert into fleet_processes (id, role, host, pid, version, known_migration, key_ids, concurrency, settings)
        values ($1, $2, $3, $4, $5, $6, $7, $8, $9)
        on conflict (id) do update set last_beat_at = now()`,
    [
      p.id,
      p.role,
      p.host,
      p.pid,
      p.version,
      p.knownMigration,
      p.keyIds,
      p.concurrency,
      JSON.stringify(p.settings),
    ],
  );
}

/** Deletes the rows of processes gone longer than FORGET_AFTER. */
export async function forgetGoneProcesses(pool: pg.Pool): Promise<void> {
  await pool.query(`delete from fleet_processes where last_beat_at < now() - interval '${FORGET_AFTER}'`);
}

/** Deletes a process's row: it leaves the fleet. */
export async function deleteProcess(pool: pg.Pool, id: string): Promise<void> {
  await pool.query('delete from fleet_processes where id = $1', [id]);
}

/** A live process's row as stored. */
export interface LiveProcessRow {
  id: string;
  role: string;
  host: string;
  pid: number;
  version: string;
  known_migration: string;
  key_ids: string[];
  concurrency: number | null;
  settings: Record<string, unknown>;
  started_at: Date;
  last_beat_at: Date;
}

/** The rows of processes that beat within `liveForMs`, oldest first. */
export async function liveProcessRows(pool: pg.Pool, liveForMs: number): Promise<LiveProcessRow[]> {
  const { rows } = await pool.query<LiveProcessRow>(
    `select * from fleet_processes where last_beat_at > now() - make_interval(secs => $1)
      order by started_at, id`,
    [liveForMs / 1000],
  );
  return rows;
}
