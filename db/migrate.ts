import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { drizzle } from 'drizzle-orm/node-postgres';
import { migrate } from 'drizzle-orm/node-postgres/migrator';
import pg from 'pg';
import { databaseName, onMaintenanceDb } from './databases.js';

/** Arbitrary constant: the advisory lock that serialises concurrent `migrate` runs. */
const MIGRATION_LOCK_KEY = 7_246_118_502;

/** The committed migrations folder, found from here whether running from source or `dist/`. */
export function migrationsFolder(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    const candidate = join(dir, 'db', 'migrations');
    if (existsSync(join(candidate, 'meta', '_journal.json'))) return candidate;
    if (existsSync(join(dir, 'migrations', 'meta', '_journal.json'))) return join(dir, 'migrations');
    dir = dirname(dir);
  }
  throw new Error('db/migrations not found next to the installed cards-sync');
}

/** Creates the database named in the URL when it does not exist; safe under concurrent callers. */
export async function ensureDatabase(databaseUrl: string): Promise<boolean> {
  const name = databaseName(databaseUrl);
  if (name === '') return false;
  const probe = new pg.Client({ connectionString: databaseUrl });
  try {
    await probe.connect();
    return false;
  } catch (error) {
    if ((error as { code?: string }).code !== '3D000') throw error;
  } finally {
    await probe.end().catch(() => {});
  }
  try {
    await onMaintenanceDb(databaseUrl, `CREATE DATABASE ${pg.escapeIdentifier(name)}`);
    return true;
  } catch (error) {
    // 42P04: created meanwhile by another process; 23505: the same race seen on the catalog index.
    const code = (error as { code?: string }).code;
    if (code === '42P04' || code === '23505') return false;
    throw error;
  }
}

export interface MigrateResult {
  createdDatabase: boolean;
  /** Migrations this call applied (0 when another process had applied them). */
  applied: number;
}

export async function appliedCount(client: pg.ClientBase): Promise<number> {
  const exists = await client.query(`select to_regclass('drizzle.__drizzle_migrations') is not null as ok`);
  if (!exists.rows[0]?.ok) return 0;
  const r = await client.query('select count(*)::int as n from drizzle.__drizzle_migrations');
  return r.rows[0]?.n ?? 0;
}

function journal(): { entries: { tag: string }[] } {
  return JSON.parse(readFileSync(join(migrationsFolder(), 'meta', '_journal.json'), 'utf8')) as {
    entries: { tag: string }[];
  };
}

/** How many migrations this release ships (db/migrations/meta/_journal.json). */
export function shippedCount(): number {
  return journal().entries.length;
}

/** The newest migration this release ships, by its tag (`0017_fleet_processes`). */
export function knownMigration(): string {
  return journal().entries.at(-1)?.tag ?? 'none';
}

/**
 * Applies the committed Drizzle migrations. Creates the database if missing; several processes
 * may run it at once (a session advisory lock lets one apply while the others wait, then find
 * nothing left to do).
 */
export async function runMigrations(databaseUrl: string): Promise<MigrateResult> {
  const createdDatabase = await ensureDatabase(databaseUrl);
  const client = new pg.Client({ connectionString: databaseUrl, application_name: 'cards-sync migrate' });
  await client.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    // Drizzle's own notices ("schema already exists") are noise here.
    await client.query('SET client_min_messages = warning');
    const before = await appliedCount(client);
    await migrate(drizzle(client), { migrationsFolder: migrationsFolder() });
    const after = await appliedCount(client);
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
    return { createdDatabase, applied: after - before };
  } finally {
    await client.end();
  }
}
