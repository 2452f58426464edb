import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import type { Db } from '../../db/client.js';
import { declareKnownMigration } from '../../db/fence.js';
import * as schema from '../../db/schema/index.js';

// The lease of the continuous refresh: a Postgres session-level advisory lock held on a
// connection of its own. Postgres lets it go the moment that session ends, so a worker killed
// with SIGKILL (its kernel closes the socket) hands it over at once, and every other worker in
// continuous mode tries to take it about once a second.
//
// Fencing: the holder's claims (claimDue, the run's fan-out counts) run on the lease's session
// itself, through `db`. A session that is gone holds no lock and answers no claim, and the pool
// refuses to open another session while the lease is held (onConnect below): a process that lost
// its session cannot hand out budget, even for a moment, until it has taken the lease again.

/** Arbitrary constant beside CLAIM_LOCK_KEY (db/refresh/schedule.ts): the lease's advisory lock. */
export const LEASE_LOCK_KEY = 7_246_118_504;

/** `application_name` of the lease's sessions, followed by ` (pid N)`. */
export const LEASE_APPLICATION_NAME = 'cards-sync refresh lease';

// How long a holder cut off from Postgres (partitioned, frozen host) keeps the lease on the
// server, about 11 s: TCP keepalives after 5 s idle, 2 s apart, 3 probes, and unacknowledged data
// for 10 s (`tcp_user_timeout`) end its session. Its own claims fail meanwhile: they go over that session.
/** A statement on the lease's session that runs longer than this is cancelled (and the lease dropped). */
const STATEMENT_MS = 10_000;

class LeaseLostError extends Error {
  override readonly name = 'LeaseLostError';
  readonly code = 'lease_lost';
}

export interface Lease {
  /** Takes the lease if it is free; true while this process holds it (its session confirmed). */
  take(): Promise<boolean>;
  /** True from a successful take until the lease is released or found lost. */
  held(): boolean;
  /** The Postgres backend pid of the session holding it while held (what pg_locks shows). */
  session(): number | undefined;
  /** Drizzle on the lease's session: what runs here runs only while the lease is held. */
  readonly db: Db;
  /** Lets the lease go at once (another worker takes it within a second). */
  release(): Promise<void>;
  /** Releases and closes the session. */
  close(): Promise<void>;
}

/** A lease on the database `base` connects to (its connection settings, a session of its own). */
export function createLease(base: pg.Pool): Lease {
  let holding = false;
  let backendPid: number | undefined;
  let pool: pg.Pool;
  let db: Db;
  const open = () => {
    const { connectionString, host, port, user, password, database, ssl } = base.options;
    pool = new pg.Pool({
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
        // The session holding the lease is gone: a new one holds nothing and may not claim.
        if (holding) throw new LeaseLostError('the continuous refresh lease was lost with its session');
        await client.query(
          `set statement_timeout = ${STATEMENT_MS}; set idle_in_transaction_session_timeout = ${STATEMENT_MS};
           set tcp_keepalives_idle = 5; set tcp_keepalives_interval = 2; set tcp_keepalives_count = 3;
           set tcp_user_timeout = 10000; ${declareKnownMigration()}`,
        );
      },
    });
    pool.on('error', () => {});
    pool.on('connect', (client) => client.on('error', () => {}));
    db = drizzle(pool, { schema }) as Db;
  };
  open();
  /** Forgets a session that failed: the next take starts on a new one. */
  const drop = async () => {
    holding = false;
    const old = pool;
    open();
    await old.end().catch(() => {});
  };
  const lease: Lease = {
    async take() {
      try {
        if (holding) {
          // Still ours: the lock is in pg_locks for this very session.
          const { rows } = await pool.query<{ ours: boolean }>(
            `select exists (select 1 from pg_locks where locktype = 'advisory' and granted
               and pid = pg_backend_pid()) as ours`,
          );
          if (rows[0]?.ours) return true;
          await drop();
          return false;
        }
        const { rows } = await pool.query<{ taken: boolean; pid: number }>(
          'select pg_try_advisory_lock($1) as taken, pg_backend_pid() as pid',
          [LEASE_LOCK_KEY],
        );
        holding = rows[0]?.taken === true;
        backendPid = rows[0]?.pid;
        return holding;
      } catch {
        await drop();
        return false;
      }
    },
    held: () => holding,
    session: () => (holding ? backendPid : undefined),
    get db() {
      return db;
    },
    async release() {
      if (!holding) return;
      try {
        await pool.query('select pg_advisory_unlock($1)', [LEASE_LOCK_KEY]);
        holding = false;
      } catch {
        // Closing the session lets the lock go as surely.
        await drop();
      }
    },
    async close() {
      await lease.release();
      holding = false;
      await pool.end().catch(() => {});
    },
  };
  return lease;
}
