import { hostname } from 'node:os';
import type pg from 'pg';
import { LEASE_APPLICATION_NAME, type LeaseHolder, leaseHolderSession } from '../../db/refresh/index.js';
import type { RedisClient } from '../redis.js';
import { QUEUE_NAME } from '../sync/index.js';

// Who holds the continuous refresh's lease, for `status` and the overview. Postgres says whether
// anyone holds it and on which session (pg_locks beside pg_stat_activity): that is the lease
// itself, so it is never out of date. The holder also writes, when it takes the lease, who it is
// and since when to Redis; that record counts only while it names the session Postgres shows.

export type { LeaseHolder };

interface HolderRecord {
  fleetId: string | null;
  host: string;
  pid: number;
  session: number;
  since: string;
}

/** Where the lease holder says who it is. */
function leaseHolderKey(prefix: string): string {
  return `${prefix}:${QUEUE_NAME}:cards-sync:lease-holder`;
}

/** Written by a worker that has just taken the lease on backend `session`. */
export async function recordLeaseHolder(
  redis: RedisClient,
  prefix: string,
  holder: { fleetId: string | null; session: number },
): Promise<void> {
  const record: HolderRecord = {
    fleetId: holder.fleetId,
    host: hostname(),
    pid: process.pid,
    session: holder.session,
    since: new Date().toISOString(),
  };
  await redis.set(leaseHolderKey(prefix), JSON.stringify(record));
}

/** The lease's holder, or null when no session holds it; without `redis`, only its pid and session. */
export async function readLeaseHolder(
  pool: pg.Pool,
  redis: RedisClient | null,
  prefix: string,
): Promise<LeaseHolder | null> {
  const row = await leaseHolderSession(pool);
  if (row === undefined) return null;
  const named = row.name?.startsWith(LEASE_APPLICATION_NAME) ? /\(pid (\d+)\)/.exec(row.name) : null;
  const pid = named ? Number(named[1]) : null;
  const raw = redis === null ? null : await redis.get(leaseHolderKey(prefix)).catch(() => null);
  const record = raw === null ? null : (JSON.parse(raw) as HolderRecord);
  if (record !== null && record.session === row.session && (pid === null || record.pid === pid)) {
    return {
      fleetId: record.fleetId,
      host: record.host,
      pid: record.pid,
      since: record.since,
      session: row.session,
    };
  }
  return { fleetId: null, host: null, pid, since: null, session: row.session };
}
