import type pg from 'pg';
import type { Db } from '../client.js';
import { leaseStillHeld, openLeaseSession, releaseLease, tryTakeLease } from './lease.js';

// The lease of the continuous refresh: a Postgres session-level advisory lock held on a
// connection of its own. Postgres lets it go the moment that session ends, so a worker killed
// with SIGKILL (its kernel closes the socket) hands it over at once, and every other worker in
// continuous mode tries to take it about once a second.
//
// Fencing: the holder's claims (claimDue, the run's fan-out counts) run on the lease's session
// itself, through `db`. A session that is gone holds no lock and answers no claim, and the pool
// refuses to open another session while the lease is held (the check `open` hands it below): a process that lost
// its session cannot hand out budget, even for a moment, until it has taken the lease again.

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
    ({ pool, db } = openLeaseSession(base, () => {
      // The session holding the lease is gone: a new one holds nothing and may not claim.
      if (holding) throw new LeaseLostError('the continuous refresh lease was lost with its session');
    }));
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
          if (await leaseStillHeld(pool)) return true;
          await drop();
          return false;
        }
        const row = await tryTakeLease(pool);
        holding = row?.taken === true;
        backendPid = row?.pid;
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
        await releaseLease(pool);
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
