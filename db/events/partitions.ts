import type pg from 'pg';
import { rootCause } from '../errors.js';

// The partitions of `change_events` (migration 0026): one per UTC day, and a default one for rows
// of a day that has none (the upkeep stopped for a week). As for the ledger (db/ledger/
// partitions.ts), each step is DDL in a short transaction of its own behind a lock_timeout, and
// retention drops whole days: no DELETE, so Debezium sees no row leave.

/** The advisory lock the event partitions' maintainers take turns on (0026's function takes it). */
const MAINTAINERS = 7246118505;
/** How long a detach may wait for its lock on `change_events` (writers queue behind it meanwhile). */
export const DETACH_LOCK_TIMEOUT_MS = 50;

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
 * within DETACH_LOCK_TIMEOUT_MS is tried again, then left for the next pass.
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
    for (let attempt = 1; ; attempt++) {
      try {
        if (await detach(pool, name)) partitions.push(name);
        break;
      } catch (error) {
        if (rootCause(error).code !== '55P03' || attempt >= (o.attempts ?? 20)) throw error;
        await new Promise((resolve) => setTimeout(resolve, Math.min(2000, 50 * 2 ** attempt)));
      }
    }
    await pool.query(`drop table if exists ${quote(name)}`);
  }
  const strays = await pool.query(
    'delete from change_events_default where created_at < now() - make_interval(days => $1)',
    [retentionDays],
  );
  return { partitions, strays: strays.rowCount ?? 0 };
}

async function detach(pool: pg.Pool, name: string): Promise<boolean> {
  const client = await pool.connect();
  try {
    await client.query('begin');
    await client.query(`set local lock_timeout = '${DETACH_LOCK_TIMEOUT_MS}ms'`);
    await client.query('select pg_advisory_xact_lock($1)', [MAINTAINERS]);
    const { rows } = await client.query(
      `select 1 from pg_inherits where inhrelid = to_regclass($1) and inhparent = 'public.change_events'::regclass`,
      [`public.${name}`],
    );
    if (rows.length > 0) await client.query(`alter table change_events detach partition ${quote(name)}`);
    await client.query('commit');
    return rows.length > 0;
  } catch (error) {
    await client.query('rollback').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
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
