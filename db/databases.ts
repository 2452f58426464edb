import pg from 'pg';

// Whole databases: a URL's database name, the same server with another one, and dropping one.

/** The database a URL names ('' for none). */
export function databaseName(databaseUrl: string): string {
  return decodeURIComponent(new URL(databaseUrl).pathname.replace(/^\//, ''));
}

/** The same server URL, another database (`postgres` for the maintenance one). */
export function withDatabase(databaseUrl: string, name: string): string {
  const u = new URL(databaseUrl);
  u.pathname = `/${encodeURIComponent(name)}`;
  return u.toString();
}

/** Connects to the server's maintenance database and leaves: throws what the connection threw. */
export async function connectToServer(databaseUrl: string, connectionTimeoutMillis: number): Promise<void> {
  const client = new pg.Client({
    connectionString: withDatabase(databaseUrl, 'postgres'),
    connectionTimeoutMillis,
  });
  try {
    await client.connect();
  } finally {
    await client.end().catch(() => {});
  }
}

/** Runs one statement on the server's maintenance database. */
export async function onMaintenanceDb(databaseUrl: string, statement: string): Promise<void> {
  const client = new pg.Client({ connectionString: withDatabase(databaseUrl, 'postgres') });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}

/** Drops the database the URL names, closing any session still on it. */
export async function dropDatabase(databaseUrl: string): Promise<void> {
  await onMaintenanceDb(
    databaseUrl,
    `drop database if exists ${pg.escapeIdentifier(databaseName(databaseUrl))} with (force)`,
  );
}
