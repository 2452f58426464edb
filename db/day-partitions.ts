import type pg from 'pg';
import { rootCause } from './errors.js';

// What the upkeep of the tables partitioned by UTC day shares (`sync_runs`, db/ledger/partitions.ts;
// `change_events`, db/events/partitions.ts): retention detaches a whole day in a short transaction
// of its own behind a lock_timeout, so that the writers queued behind the detach wait no longer
// than that, tries again while the table is busy, then drops the detached table (which waits for
// no one). Never a DELETE: a day leaves whole.

/** How long a detach may wait for each of its locks (writers queue behind it meanwhile). */
const DETACH_LOCK_TIMEOUT_MS = 50;

/** A table partitioned by UTC day. */
export interface DayPartitionedTable {
  /** The partitioned table, in `public` (`sync_runs`); a constant, never input. */
  parent: string;
  /** The advisory lock its maintainers take turns on. */
  maintainersLock: number;
  /** The partition's name, quoted; throws for a name that is not one of this table's partitions. */
  quote(name: string): string;
}

/**
 * Takes the maintainers' lock for the transaction under way, without waiting: false when another
 * maintainer holds it. Every worker runs the same upkeep; the one that finds the lock taken leaves
 * the step to the one at it, rather than wait (and time out) to find the work done.
 */
export async function tryMaintainersLock(
  client: pg.ClientBase,
  table: DayPartitionedTable,
): Promise<boolean> {
  const { rows } = await client.query<{ ok: boolean }>('select pg_try_advisory_xact_lock($1) as ok', [
    table.maintainersLock,
  ]);
  return rows[0]?.ok === true;
}

/**
 * Detaches one partition (tried again, with backoff, while a lock cannot be had within
 * DETACH_LOCK_TIMEOUT_MS, up to `attempts` times: default 20), then drops it; true when this call
 * detached it, false when another maintainer did first.
 */
export async function detachAndDrop(
  pool: pg.Pool,
  table: DayPartitionedTable,
  name: string,
  o: { attempts?: number; onRetry?: (name: string) => void } = {},
): Promise<boolean> {
  let detached: boolean | 'busy' = false;
  for (let attempt = 1; ; attempt++) {
    try {
      detached = await detach(pool, table, name);
      // Another maintainer is at it: the day is theirs to detach and drop.
      if (detached === 'busy') return false;
      break;
    } catch (error) {
      if (rootCause(error).code !== '55P03' || attempt >= (o.attempts ?? 20)) throw error;
      o.onRetry?.(name);
      await new Promise((resolve) => setTimeout(resolve, Math.min(2000, 50 * 2 ** attempt)));
    }
  }
  // Detached, it is a table of its own: dropping it waits for no one. Another maintainer may have
  // dropped it already.
  await pool.query(`drop table if exists ${table.quote(name)}`);
  return detached;
}

/**
 * Detaches one partition if it is still attached, waiting at most DETACH_LOCK_TIMEOUT_MS for the
 * table's lock: false when another maintainer did it first, `busy` when another holds the
 * maintainers' lock now.
 */
async function detach(pool: pg.Pool, table: DayPartitionedTable, name: string): Promise<boolean | 'busy'> {
  const client = await pool.connect();
  try {
    await client.query('begin');
    await client.query(`set local lock_timeout = '${DETACH_LOCK_TIMEOUT_MS}ms'`);
    if (!(await tryMaintainersLock(client, table))) {
      await client.query('rollback');
      return 'busy';
    }
    const { rows } = await client.query(
      `select 1 from pg_inherits where inhrelid = to_regclass($1) and inhparent = 'public.${table.parent}'::regclass`,
      [`public.${name}`],
    );
    if (rows.length > 0) {
      await client.query(`alter table ${table.parent} detach partition ${table.quote(name)}`);
    }
    await client.query('commit');
    return rows.length > 0;
  } catch (error) {
    await client.query('rollback').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}
