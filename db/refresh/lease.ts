import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import type { Db } from '../client.js';
import { declareKnownMigration } from '../fence.js';
import * as schema from '../schema/index.js';

// The statements of the continuous refresh's lease (db/refresh/lease-session.ts holds it): a
// session-level advisory lock on a connection of its own, the session it lives on, and who holds
// it as pg_locks beside pg_stat_activity tell.

/** Arbitrary constant beside CLAIM_LOCK_KEY (db/refresh/schedule.ts): the lease's advisory lock. */
export const LEASE_LOCK_KEY = 7_246_118_504;

/** `application_name` of the lease's sessions, followed by ` (pid N)`. */
export const LEASE_APPLICATION_NAME = 'cards-sync refresh lease';

// How long a holder cut off from Postgres (partitioned, frozen host) keeps the lease on the
// server, about 11 s: TCP keepalives after 5 s idle, 2 s apart, 3 probes, and unacknowledged data
// for 10 s (`tcp_user_timeout`) end its session. Its own claims fail meanwhile: they go over that session.
/** A statement on the lease's session that runs longer than this is cancelled (and the lease dropped). */
const STATEMENT_MS = 10_000;

/**
 * The lease's session: a pool of one connection on the database `base` connects to (its
 * connection settings), never closed for being idle, and Drizzle on it. `beforeConnect` runs
 * before every new connection and throws to refuse it (a new session holds nothing).
 */
export function openLeaseSession(base: pg.Pool, beforeConnect: () => void): { pool: pg.Pool; db: Db } {
  const { connectionString, host, port, user, password, database, ssl } = base.options;
  const pool = new pg.Pool({
    connectionString,
    host,
    port,
    user,
    password,
    database,
    ssl,
    max: 1,
    // Never closed for being idle: the session is the lease.
    idleTimeoutMillis: 0,
    connectionTimeoutMillis: 10_000,
    query_timeout: STATEMENT_MS + 5000,
    keepAlive: true,
    keepAliveInitialDelayMillis: 5000,
    // Who holds it, for an operator (and the tests) reading pg_stat_activity beside pg_locks.
    application_name: `${LEASE_APPLICATION_NAME} (pid ${process.pid})`,
    onConnect: async (client: pg.ClientBase) => {
      beforeConnect();
      await client.query(
        `set statement_timeout = ${STATEMENT_MS}; set idle_in_transaction_session_timeout = ${STATEMENT_MS};
           set tcp_keepalives_idle = 5; set tcp_keepalives_interval = 2; set tcp_keepalives_count = 3;
           set tcp_user_timeout = 10000; ${declareKnownMigration()}`,
      );
    },
  });
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  return { pool, db: drizzle(pool, { schema }) as Db };
}

/**
 * The worker holding the lease, as `status --json` carries it (`continuous.leaseHolder`):
 * the session from Postgres, the rest from the record the holder writes to Redis
 * (jobs/refresh/lease-holder.ts). A plain shape here, so that src/fleet can tell it without jobs/.
 */
export interface LeaseHolder {
  /** Its fleet id (fleet_processes.id); null when its record is missing (then only its pid is known). */
  fleetId: string | null;
  /** Its host; null when its record is missing. */
  host: string | null;
  /** Its OS pid, from the lease session's application_name. */
  pid: number | null;
  /** When it took the lease (ISO); null when its record is missing. */
  since: string | null;
  /** The Postgres backend pid of the lease's session: `select pg_terminate_backend(...)` ends the lease. */
  session: number;
}

/** Whether this very session holds an advisory lock (the lease's is the only one it takes). */
export async function leaseStillHeld(pool: pg.Pool): Promise<boolean> {
  const { rows } = await pool.query<{ ours: boolean }>(
    `select exists (select 1 from pg_locks where locktype = 'advisory' and granted
               and pid = pg_backend_pid()) as ours`,
  );
  return rows[0]?.ours === true;
}

/** Takes the lease if it is free: whether it was taken, and the session's backend pid. */
export async function tryTakeLease(pool: pg.Pool): Promise<{ taken: boolean; pid: number } | undefined> {
  const { rows } = await pool.query<{ taken: boolean; pid: number }>(
    'select pg_try_advisory_lock($1) as taken, pg_backend_pid() as pid',
    [LEASE_LOCK_KEY],
  );
  return rows[0];
}

/** Lets the lease go, on the session that holds it. */
export async function releaseLease(pool: pg.Pool): Promise<void> {
  await pool.query('select pg_advisory_unlock($1)', [LEASE_LOCK_KEY]);
}

/** The session holding the lease in this database and its `application_name`, or undefined when none. */
export async function leaseHolderSession(
  pool: pg.Pool,
): Promise<{ session: number; name: string | null } | undefined> {
  const { rows } = await pool.query<{ session: number; name: string | null }>(
    `select l.pid as session, a.application_name as name
       from pg_locks l left join pg_stat_activity a on a.pid = l.pid
      where l.locktype = 'advisory' and l.granted and l.objsubid = 1
        and l.classid = ($1::bigint >> 32)::oid and l.objid = ($1::bigint & 4294967295)::oid
        and l.database = (select oid from pg_database where datname = current_database())`,
    [LEASE_LOCK_KEY],
  );
  return rows[0];
}
