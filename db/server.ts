import { sql } from 'drizzle-orm';
import pg from 'pg';
import type { Db } from './client.js';

// The server itself, not a table: whether it answers, what it runs, its clock. For `doctor`, the
// admin server's readiness, and the probes that ask Postgres before an API request is spent.

/** A statement that reads nothing: it fails when Postgres does not answer. */
export function ping(db: Db): Promise<unknown> {
  return db.execute(sql`select 1`);
}

/** {@link ping}, on a bare pool. */
export function pingPool(pool: pg.Pool): Promise<unknown> {
  return pool.query('select 1');
}

/**
 * A client of its own for `doctor`, connected (the caller ends it; one that cannot connect is
 * ended here and the error thrown), apart from any pool, so that a check that hangs holds nothing
 * of the product's.
 */
export async function checkClient(databaseUrl: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5000 });
  client.on('error', () => {});
  try {
    await client.connect();
  } catch (error) {
    await client.end().catch(() => {});
    throw error;
  }
  return client;
}

/** A one-connection pool for a `doctor` check (the caller ends it). */
export function checkPool(databaseUrl: string): pg.Pool {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 1, connectionTimeoutMillis: 5000 });
  pool.on('error', () => {});
  return pool;
}

/** `server_version`, as Postgres reports it. */
export async function serverVersion(client: pg.ClientBase): Promise<string | undefined> {
  return (await client.query<{ v: string }>("select current_setting('server_version') as v")).rows[0]?.v;
}

/** Whether this session is encrypted (undefined when pg_stat_ssl has no row for it). */
export async function sessionUsesTls(client: pg.ClientBase): Promise<boolean | undefined> {
  return (await client.query<{ ssl: boolean }>('select ssl from pg_stat_ssl where pid = pg_backend_pid()'))
    .rows[0]?.ssl;
}

/** Postgres's clock now (`clock_timestamp()`, not the transaction's), ms since the epoch. */
export async function serverClockMs(client: pg.ClientBase): Promise<number> {
  return Number(
    (await client.query<{ ms: string }>('select extract(epoch from clock_timestamp()) * 1000 as ms')).rows[0]!
      .ms,
  );
}
