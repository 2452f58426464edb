import type pg from 'pg';
import { type DayPartitionedTable, detachAndDrop } from '../day-partitions.js';

// The partitions of `change_events` (migration 0026): one per UTC day, and a default one for rows
// of a day that has none (the upkeep stopped for a week). As for the ledger (db/ledger/
// partitions.ts, and with its code: db/day-partitions.ts), each step is DDL in a short transaction
// of its own behind a lock_timeout, and retention drops whole days: no DELETE, so Debezium sees no
// row leave.

/** `change_events` for the day partitions' shared upkeep (db/day-partitions.ts). */
const CHANGE_EVENTS: DayPartitionedTable = {
  parent: 'change_events',
  // The advisory lock the event partitions' maintainers take turns on (0026's function takes it).
  maintainersLock: 7246118505,
  quote,
};

/** Creates the partitions of the UTC days from yesterday to `aheadDays` after today; returns their names. */
export async function addEventPartitions(pool: pg.Pool, aheadDays: number): Promise<string[]> {
  const { rows } = await pool.query<{ name: string | null }>(
    `select change_events_add_partition(d::date) as name
     from generate_series((now() at time zone 'UTC')::date - 1, (now() at time zone 'UTC')::date + $1::int, interval '1 day') d`,
    [aheadDays],
  );
  return rows.flatMap((r) => (r.name ? [r.name] : []));
}

export interface DroppedEvents {
  partitions: string[];
  /** Rows deleted from the default partition (only a stopped upkeep leaves any there). */
  strays: number;
}

/**
 * Retention: detaches and drops every day partition whose day ended more than `retentionDays`
 * ago; rows as old in the default partition are deleted. A detach that cannot have its lock
 * within DETACH_LOCK_TIMEOUT_MS is tried again, up to `attempts` times (default 20), then left for
 * the next pass.
 */
export async function dropExpiredEvents(
  pool: pg.Pool,
  retentionDays: number,
  o: { attempts?: number } = {},
): Promise<DroppedEvents> {
  const { rows } = await pool.query<{ name: string }>(
    `select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid
     where i.inhparent = 'public.change_events'::regclass
       and sync_runs_partition_to(c.oid) <= now() - make_interval(days => $1)
     order by sync_runs_partition_to(c.oid)`,
    [retentionDays],
  );
  const partitions: string[] = [];
  for (const { name } of rows) {
    if (await detachAndDrop(pool, CHANGE_EVENTS, name, o)) partitions.push(name);
  }
  const strays = await pool.query(
    'delete from change_events_default where created_at < now() - make_interval(days => $1)',
    [retentionDays],
  );
  return { partitions, strays: strays.rowCount ?? 0 };
}

function quote(name: string): string {
  if (!/^change_events_p\d{8}$/.test(name)) throw new Error(`not a change_events day partition: ${name}`);
  return `"${name}"`;
}

/** Whether `change_events` exists yet (false before migration 0026). */
export async function eventsTableExists(pool: pg.Pool): Promise<boolean> {
  const { rows } = await pool.query<{ ok: boolean }>(
    `select to_regclass('public.change_events') is not null as ok`,
  );
  return rows[0]?.ok === true;
}
