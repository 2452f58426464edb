import type pg from 'pg';
import { LEASE_APPLICATION_NAME, LEASE_LOCK_KEY } from '../../db/refresh/lease.js';

/** The OS pid of the worker holding the continuous refresh's lease, read from Postgres; none when free. */
export async function leaseHolderPid(pool: pg.Pool): Promise<number | undefined> {
  const { rows } = await pool.query<{ name: string }>(
    `select a.application_name as name from pg_locks l join pg_stat_activity a on a.pid = l.pid
      where l.locktype = 'advisory' and l.granted and l.objsubid = 1
        and l.classid = ($1::bigint >> 32)::oid and l.objid = ($1::bigint & 4294967295)::oid
        and l.database = (select oid from pg_database where datname = current_database())`,
    [LEASE_LOCK_KEY],
  );
  const name = rows[0]?.name;
  if (name === undefined || !name.startsWith(LEASE_APPLICATION_NAME)) return undefined;
  return Number(/pid (\d+)/.exec(name)?.[1]);
}
