import pg from 'pg';
import { type DayPartitionedTable, detachAndDrop, tryMaintainersLock } from '../day-partitions.js';

// The ledger's partitions (migration 0019): `sync_runs` holds one partition per UTC day, a default
// partition for rows of a day that has none, and after an upgrade `sync_runs_legacy`, the ledger
// as it was, from the beginning of time to a UTC midnight. The maintenance here keeps days ahead
// of the clock, moves stray rows out of the default, and drops the days past the retention.
//
// Every step is DDL in a short transaction of its own, behind a lock_timeout: a step that would wait
// for a lock gives up, so that the writers queued behind it wait no longer than that, and is tried
// again later. Only retention takes a lock writers wait for (DETACH without CONCURRENTLY, which
// PostgreSQL refuses while a default partition exists); it waits at most DETACH_LOCK_TIMEOUT_MS
// (db/day-partitions.ts, whose retention the change events' partitions share).

/** `sync_runs` for the day partitions' shared upkeep (db/day-partitions.ts). */
const SYNC_RUNS: DayPartitionedTable = {
  parent: 'sync_runs',
  // The advisory lock the ledger's maintainers take turns on (migration 0031's function takes it):
  // not 7246118504, the continuous refresh's lease, which its holder keeps all the while.
  maintainersLock: 7246118506,
  quote,
};

export interface LedgerPartition {
  name: string;
  /** Null for the default partition and for MINVALUE (the legacy partition). */
  from: Date | null;
  /** Null for the default partition. */
  to: Date | null;
  isDefault: boolean;
  /** The planner's estimate, from the last VACUUM or ANALYZE (-1: never counted). */
  estimatedRows: number;
  bytes: number;
}

/** A pool, or one client (migrate's). */
type Queryable = pg.Pool | pg.ClientBase;

/** Whether `sync_runs` is partitioned yet (false before migration 0019). */
export async function ledgerIsPartitioned(db: Queryable): Promise<boolean> {
  const { rows } = await db.query<{ p: boolean }>(
    `select coalesce((select relkind = 'p' from pg_class where oid = to_regclass('public.sync_runs')), false) as p`,
  );
  return rows[0]?.p === true;
}

/** Rows in the default partition (a clock far off wrote them), and the database's clock now. */
export async function defaultPartitionRows(db: Queryable): Promise<{ n: number; now: Date }> {
  const { rows } = await db.query<{ n: number; now: Date }>(
    'select (select count(*) from sync_runs_default)::int as n, now() as now',
  );
  return rows[0]!;
}

/** The partitions of `sync_runs`, oldest first, the default last. */
export async function ledgerPartitions(db: Queryable): Promise<LedgerPartition[]> {
  const { rows } = await db.query<{
    name: string;
    from: Date | null;
    to: Date | null;
    is_default: boolean;
    rows: string;
    bytes: string;
  }>(
    `select c.relname as name, sync_runs_partition_from(c.oid) as "from", sync_runs_partition_to(c.oid) as "to",
       pg_get_expr(c.relpartbound, c.oid) = 'DEFAULT' as is_default,
       c.reltuples::bigint as rows, pg_total_relation_size(c.oid) as bytes
     from pg_inherits i join pg_class c on c.oid = i.inhrelid
     where i.inhparent = 'public.sync_runs'::regclass
     order by is_default, "to" nulls last`,
  );
  return rows.map((r) => ({
    name: r.name,
    from: r.from,
    to: r.to,
    isDefault: r.is_default,
    estimatedRows: Number(r.rows),
    bytes: Number(r.bytes),
  }));
}

/**
 * Makes sure every UTC day from `behindDays` before today to `aheadDays` after it (by the
 * database's clock) has its partition; returns the names of those it created.
 */
export async function addLedgerPartitions(
  db: Queryable,
  o: { aheadDays: number; behindDays?: number },
): Promise<string[]> {
  const { rows: days } = await db.query<{ day: string }>(
    `select to_char(d, 'YYYY-MM-DD') as day
     from generate_series((now() at time zone 'UTC')::date - $1::int, (now() at time zone 'UTC')::date + $2::int, interval '1 day') d`,
    [o.behindDays ?? 1, o.aheadDays],
  );
  // Every day in one transaction under the maintainers' lock: a second maintainer finds it taken
  // and leaves the days to the first (made by it, or found made), rather than wait its turn.
  return withLockTimeout(db, 5000, async (client) => {
    if (!(await tryMaintainersLock(client, SYNC_RUNS))) return [];
    const created: string[] = [];
    for (const { day } of days) {
      const { rows } = await client.query<{ name: string | null }>(
        'select sync_runs_add_partition($1::date) as name',
        [day],
      );
      if (rows[0]?.name) created.push(rows[0].name);
    }
    return created;
  });
}

/**
 * Moves the rows the default partition caught (a clock far ahead or behind when they were written)
 * into partitions of their own days; returns how many moved. Writers to other days never wait.
 */
export async function rehomeDefaultRows(pool: pg.Pool): Promise<number> {
  const { rows: days } = await pool.query<{ day: string }>(
    `select distinct to_char((started_at at time zone 'UTC')::date, 'YYYY-MM-DD') as day from sync_runs_default order by 1`,
  );
  let moved = 0;
  for (const { day } of days) {
    const client = await pool.connect();
    try {
      await client.query('begin');
      await client.query(`set local lock_timeout = '1s'`);
      // Another maintainer is moving them: they are its to move.
      if (!(await tryMaintainersLock(client, SYNC_RUNS))) {
        await client.query('rollback');
        break;
      }
      // Writes to the default wait (only stray rows go there); every other day's do not.
      await client.query('lock table sync_runs_default in share row exclusive mode');
      const name = `sync_runs_p${day.replaceAll('-', '')}`;
      const lo = `${day}T00:00:00Z`;
      const { rows } = await client.query<{ hi: string; left: boolean }>(
        `select ($1::date + 1)::text || 'T00:00:00Z' as hi,
           exists (select 1 from sync_runs_default
             where started_at >= $2 and started_at < ($1::date + 1)::timestamp at time zone 'UTC') as left`,
        [day, lo],
      );
      // Another worker's upkeep may have moved them while this one waited for the lock.
      if (!rows[0]!.left) {
        await client.query('commit');
        continue;
      }
      const hi = rows[0]!.hi;
      await client.query(`create table ${name} (like sync_runs including defaults including constraints)`);
      const ins = await client.query(
        `insert into ${name} select * from sync_runs_default where started_at >= $1 and started_at < $2`,
        [lo, hi],
      );
      await client.query('delete from sync_runs_default where started_at >= $1 and started_at < $2', [
        lo,
        hi,
      ]);
      await client.query(
        `alter table sync_runs attach partition ${name} for values from ('${lo}') to ('${hi}')`,
      );
      await client.query('commit');
      moved += ins.rowCount ?? 0;
    } catch (error) {
      await client.query('rollback').catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  }
  return moved;
}

export interface DroppedPartition {
  name: string;
  estimatedRows: number;
  bytes: number;
}

/**
 * Retention: detaches and drops every partition whose days all ended more than `retentionDays`
 * ago (the legacy partition included, once its newest day has), never a row at a time. A detach
 * that cannot have its lock within DETACH_LOCK_TIMEOUT_MS (a long query on sync_runs) is tried
 * again, up to `attempts` times, then left for the next maintenance.
 */
export async function dropExpiredPartitions(
  pool: pg.Pool,
  retentionDays: number,
  o: { attempts?: number; onRetry?: (name: string) => void } = {},
): Promise<DroppedPartition[]> {
  const { rows } = await pool.query<{ name: string; rows: string; bytes: string }>(
    `select c.relname as name, c.reltuples::bigint as rows, pg_total_relation_size(c.oid) as bytes
     from pg_inherits i join pg_class c on c.oid = i.inhrelid
     where i.inhparent = 'public.sync_runs'::regclass
       and sync_runs_partition_to(c.oid) <= now() - make_interval(days => $1)
     order by sync_runs_partition_to(c.oid)`,
    [retentionDays],
  );
  const dropped: DroppedPartition[] = [];
  for (const r of rows) {
    if (await detachAndDrop(pool, SYNC_RUNS, r.name, o))
      dropped.push({ name: r.name, estimatedRows: Math.max(0, Number(r.rows)), bytes: Number(r.bytes) });
  }
  return dropped;
}

async function withLockTimeout<T>(
  db: Queryable,
  ms: number,
  work: (client: pg.ClientBase) => Promise<T>,
): Promise<T> {
  // One transaction: `set local` ends with it.
  const own = db instanceof pg.Pool;
  const client = db instanceof pg.Pool ? await db.connect() : db;
  try {
    await client.query('begin');
    await client.query(`set local lock_timeout = '${Math.round(ms)}ms'`);
    const result = await work(client);
    await client.query('commit');
    return result;
  } catch (error) {
    await client.query('rollback').catch(() => undefined);
    throw error;
  } finally {
    if (own) (client as pg.PoolClient).release();
  }
}

function quote(name: string): string {
  if (!/^sync_runs_[a-z0-9_]+$/.test(name)) throw new Error(`not a ledger partition: ${name}`);
  return `"${name}"`;
}

/** The mark a day partition gets once its indexes are compacted (the partition table's comment). */
const CLOSED = 'cards-sync: day closed, indexes compacted';

/**
 * Compacts the indexes of days that have ended, once each: the (subscriber_id, started_at) B-tree,
 * filled in subscriber order as the day went, stands about 70% full; rebuilt CONCURRENTLY (writers
 * never wait) it is packed, about 10 bytes a run less. Its BRIN ranges are summarized at the same
 * time. Returns the days compacted.
 */
export async function compactClosedDays(
  pool: pg.Pool,
  o: { limit?: number; minIndexBytes?: number } = {},
): Promise<string[]> {
  const { rows } = await pool.query<{ name: string; idx: string | null; bytes: string | null }>(
    `select c.relname as name, b.idx, pg_relation_size(b.oid) as bytes
     from pg_inherits i join pg_class c on c.oid = i.inhrelid
     left join lateral (
        select ic.relname as idx, ic.oid from pg_index x join pg_class ic on ic.oid = x.indexrelid
          join pg_inherits ii on ii.inhrelid = x.indexrelid
        where x.indrelid = c.oid and ii.inhparent = 'public.sync_runs_subscriber_started_idx'::regclass
      ) b on true
     where i.inhparent = 'public.sync_runs'::regclass
       and sync_runs_partition_from(c.oid) is not null
       and sync_runs_partition_to(c.oid) <= now()
       and obj_description(c.oid, 'pg_class') is distinct from $1
     order by sync_runs_partition_to(c.oid)
     limit $2`,
    [CLOSED, o.limit ?? 3],
  );
  const done: string[] = [];
  for (const r of rows) {
    try {
      // A small index (a quiet day, a test) is not worth a rebuild.
      if (r.idx && Number(r.bytes) >= (o.minIndexBytes ?? 8 * 1024 * 1024)) {
        await pool.query(`reindex index concurrently ${quote(r.idx)}`);
      }
      await pool.query(
        `select brin_summarize_new_values(x.indexrelid) from pg_index x join pg_class ic on ic.oid = x.indexrelid
         join pg_am am on am.oid = ic.relam where x.indrelid = $1::regclass and am.amname = 'brin'`,
        [r.name],
      );
      await pool.query(`comment on table ${quote(r.name)} is '${CLOSED}'`);
      done.push(r.name);
    } catch (error) {
      // Another worker's upkeep dropped the day (retention) after this one listed it: nothing is
      // left to compact.
      if ((error as { code?: string }).code !== UNDEFINED_TABLE) throw error;
    }
  }
  return done;
}

/** Postgres's undefined_table: a relation named that no longer exists. */
const UNDEFINED_TABLE = '42P01';
