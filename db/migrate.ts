import { setTimeout as sleep } from 'node:timers/promises';
import { drizzle } from 'drizzle-orm/node-postgres';
import { migrate } from 'drizzle-orm/node-postgres/migrator';
import pg from 'pg';
import { behind, breakingTags } from './breaking.js';
import { databaseName, onMaintenanceDb } from './databases.js';
import { declareKnownMigration } from './fence.js';
import { journal, migrationsFolder } from './journal.js';
import { afterMigrations } from './ledger/index.js';
import { preparedMigration } from './prepare.js';

export { knownMigration, migrationsFolder, shippedCount } from './journal.js';

/** Arbitrary constant: the advisory lock that serialises concurrent `migrate` runs. */
const MIGRATION_LOCK_KEY = 7_246_118_502;

/** Creates the database named in the URL when it does not exist; safe under concurrent callers. */
async function ensureDatabase(databaseUrl: string): Promise<boolean> {
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
  /** With `force`: the breaking migration applied over live processes that do not know it. */
  forced?: { migration: string; processes: LiveProcess[] };
}

/** A live process of the fleet (fleet_processes), as a refusal names it. */
export interface LiveProcess {
  id: string;
  role: string;
  version: string;
  knownMigration: string;
}

export interface MigrateOptions {
  /** How long to wait for live processes that do not know a pending breaking migration. Default 0. */
  waitMs?: number;
  /** Apply a breaking migration even while such processes live. */
  force?: boolean;
  /** Told, every few seconds of a wait, who is still in the way. */
  onWait?: (processes: LiveProcess[], migration: string) => void;
  /** The migrations folder (tests); default the release's own. */
  folder?: string;
  /** This release's version, kept beside each breaking migration it applies: the writer fence names it. */
  release?: string;
}

/** `migrate` refused a breaking migration: live processes do not know it. */
export class BreakingMigrationRefused extends Error {
  constructor(
    readonly migration: string,
    readonly processes: LiveProcess[],
    waitedMs: number,
  ) {
    super(
      `migration ${migration} is breaking, and ${processes.length} live process${processes.length === 1 ? '' : 'es'} ` +
        `do${processes.length === 1 ? 'es' : ''} not know it: ${processes
          .map((p) => `${p.role} ${p.id} (${p.version}, knows up to ${p.knownMigration})`)
          .join('; ')}${waitedMs > 0 ? ` (waited ${Math.round(waitedMs / 1000)} s)` : ''}. ` +
        'Stop or upgrade them, or run migrate --wait 10m to wait for them to leave, or --force',
    );
  }
}

/** Records breaking migrations in `breaking_migrations`; false when the table does not exist yet. */
async function recordBreaking(client: pg.Client, tags: string[]): Promise<boolean> {
  const exists = await client.query<{ ok: boolean }>(
    `select to_regclass('public.breaking_migrations') is not null as ok`,
  );
  if (!exists.rows[0]?.ok) return false;
  if (tags.length > 0) {
    await client.query(
      'insert into breaking_migrations (tag) select unnest($1::text[]) on conflict do nothing',
      [tags],
    );
  }
  return true;
}

/**
 * After breaking migrations were applied: the writer fence (db/fence.ts) now asks for the newest of
 * them, and names the release that applied them. Nothing to do before the fence exists (0029).
 */
async function moveFence(
  client: pg.Client,
  appliedNow: string[],
  release: string | undefined,
): Promise<void> {
  const { rows } = await client.query<{ ok: boolean }>(
    `select to_regprocedure('cards_sync_move_fence(text)') is not null as ok`,
  );
  if (!rows[0]?.ok) return;
  if (release !== undefined) {
    await client.query(
      'update breaking_migrations set release = $1 where release is null and tag = any($2::text[])',
      [release, appliedNow],
    );
  }
  const newest = (await client.query<{ tag: string }>('select max(tag) as tag from breaking_migrations'))
    .rows[0]?.tag;
  if (newest) await client.query('select cards_sync_move_fence($1)', [newest]);
}

/** Live processes (a beat within 45 s) that know migrations only up to before `tag`. */
async function processesBehind(client: pg.Client, tag: string): Promise<LiveProcess[]> {
  const exists = await client.query<{ ok: boolean }>(
    `select to_regclass('public.fleet_processes') is not null as ok`,
  );
  if (!exists.rows[0]?.ok) return [];
  const { rows } = await client.query<{ id: string; role: string; version: string; known_migration: string }>(
    `select id, role, version, known_migration from fleet_processes
      where last_beat_at > now() - interval '45 seconds' order by started_at, id`,
  );
  return rows
    .filter((r) => behind(r.known_migration, tag))
    .map((r) => ({ id: r.id, role: r.role, version: r.version, knownMigration: r.known_migration }));
}

export async function appliedCount(client: pg.ClientBase): Promise<number> {
  const exists = await client.query(`select to_regclass('drizzle.__drizzle_migrations') is not null as ok`);
  if (!exists.rows[0]?.ok) return 0;
  const r = await client.query('select count(*)::int as n from drizzle.__drizzle_migrations');
  return r.rows[0]?.n ?? 0;
}

/**
 * Applies the committed Drizzle migrations. Creates the database if missing; several processes
 * may run it at once (a session advisory lock lets one apply while the others wait, then find
 * nothing left to do).
 */
export async function runMigrations(databaseUrl: string, o: MigrateOptions = {}): Promise<MigrateResult> {
  const folder = o.folder ?? migrationsFolder();
  const createdDatabase = await ensureDatabase(databaseUrl);
  const client = new pg.Client({ connectionString: databaseUrl, application_name: 'cards-sync migrate' });
  await client.connect();
  const tags = journal(folder).entries.map((e) => e.tag);
  try {
    // Drizzle's own notices ("schema already exists") are noise here.
    await client.query('SET client_min_messages = warning');
    // A migration that moves data writes as this release, past the writer fence (db/fence.ts).
    await client.query(declareKnownMigration(tags.at(-1)));
    const breaking = breakingTags(folder);
    const pendingBreaking = async () =>
      tags
        .slice(await appliedCount(client))
        .filter((t) => breaking.includes(t))
        .at(-1);
    // Wait for the processes in the way before taking the lock: another migrate (an operator's
    // --force, another pod's) is not held up by this one's wait.
    const started = Date.now();
    let forced: MigrateResult['forced'];
    for (let pending = await pendingBreaking(); pending !== undefined; pending = await pendingBreaking()) {
      const inTheWay = await processesBehind(client, pending);
      if (inTheWay.length === 0 || o.force) break;
      if (Date.now() - started >= (o.waitMs ?? 0)) {
        throw new BreakingMigrationRefused(pending, inTheWay, o.waitMs ?? 0);
      }
      o.onWait?.(inTheWay, pending);
      await sleep(Math.min(2000, Math.max(100, (o.waitMs ?? 0) / 20)));
    }
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    const before = await appliedCount(client);
    const pending = tags
      .slice(before)
      .filter((t) => breaking.includes(t))
      .at(-1);
    if (pending !== undefined) {
      // Recorded first, then the fleet read again: a worker joins the fleet before it reads the
      // record, so of a worker starting now and this migrate, one sees the other.
      const recorded = await recordBreaking(client, [pending]);
      const inTheWay = await processesBehind(client, pending);
      if (inTheWay.length > 0 && !o.force) {
        if (recorded) await client.query('delete from breaking_migrations where tag = $1', [pending]);
        throw new BreakingMigrationRefused(pending, inTheWay, o.waitMs ?? 0);
      }
      if (inTheWay.length > 0) forced = { migration: pending, processes: inTheWay };
    }
    // What would hold locks long (a scan, an index build) is done first, while writers go on.
    await preparedMigration(client, tags.slice(before), () =>
      migrate(drizzle(client), { migrationsFolder: folder }),
    );
    await afterMigrations(client);
    const after = await appliedCount(client);
    // Fresh statistics for what the migrations made or moved: without them the planner guesses,
    // and a history question can read a table whole until autovacuum gets round to it.
    if (after > before) await client.query('analyze');
    // The database keeps which breaking migrations it has, for releases that do not know them.
    const applied = tags.slice(0, after).filter((t) => breaking.includes(t));
    await recordBreaking(client, applied);
    const appliedNow = tags.slice(before, after).filter((t) => breaking.includes(t));
    if (appliedNow.length > 0) await moveFence(client, appliedNow, o.release);
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
    return { createdDatabase, applied: after - before, ...(forced ? { forced } : {}) };
  } finally {
    await client.end();
  }
}
