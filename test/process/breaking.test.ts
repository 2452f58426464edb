import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { BreakingMigrationRefused, migrationsFolder, runMigrations } from '../../db/migrate.js';
import { cmdMigrate } from '../../src/cli/sync.js';
import { loadConfig } from '../../src/config/index.js';
import { joinFleet, liveFleet, type ProcessInfo } from '../../src/fleet/registry.js';
import { makeCard, ok, useScriptedApi, workerEnv } from '../support/fixtures.js';
import { useCleanups, useTestDatabase } from '../support/helpers.js';
import { runCli, startCli, testQueue, waitFor } from '../support/queue-helpers.js';

// Breaking migrations: the record, a worker that refuses to start or leaves
// with exit 3, and a migrate that waits for, names, or is forced past the processes in the way.

const database = useTestDatabase();
const upstream = useScriptedApi();
const cleanups = useCleanups();
const pool = () => database.handle.pool;

/** The release's migrations plus a test-only breaking one, 0099_test_breaking, in a folder of their own. */
function withTestBreakingMigration(): string {
  const dir = mkdtempSync(join(tmpdir(), 'cards-sync-migrations-'));
  cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
  cpSync(migrationsFolder(), dir, { recursive: true });
  const journalPath = join(dir, 'meta', '_journal.json');
  const journal = JSON.parse(readFileSync(journalPath, 'utf8')) as {
    entries: { idx: number; version: string; when: number; tag: string; breakpoints: boolean }[];
  };
  const last = journal.entries.at(-1)!;
  journal.entries.push({ ...last, idx: last.idx + 1, when: last.when + 1000, tag: '0099_test_breaking' });
  writeFileSync(journalPath, JSON.stringify(journal));
  writeFileSync(join(dir, '0099_test_breaking.sql'), 'CREATE TABLE "test_breaking_marker" ("id" integer);');
  const record = JSON.parse(readFileSync(join(dir, 'breaking.json'), 'utf8')) as {
    breaking: Record<string, string>;
  };
  record.breaking['0099_test_breaking'] = 'test only';
  writeFileSync(join(dir, 'breaking.json'), JSON.stringify(record));
  return dir;
}

const OLD: ProcessInfo = {
  role: 'worker',
  version: '0.0.9-old',
  knownMigration: '0018_breaking_migrations',
  keyIds: [],
  concurrency: 4,
  settings: {},
};

/** Row counts of every table a sync or a rotation writes, to show that a refusal wrote none. */
async function writtenRows(): Promise<Record<string, number>> {
  const tables = [
    'saved_cards',
    'saved_card_change_log',
    'card_conflicts',
    'subscribers',
    'subscriber_schedule',
    'sync_runs',
    'change_events',
    'admin_actions',
  ];
  const out: Record<string, number> = {};
  for (const table of tables) {
    const { rows } = await pool().query<{ n: number }>(`select count(*)::int as n from ${table}`);
    out[table] = rows[0]!.n;
  }
  return out;
}

function setup() {
  const q = testQueue();
  cleanups.push(q.cleanup);
  return {
    q,
    env: workerEnv({
      databaseUrl: database.url,
      redisUrl: inject('redisUrl'),
      prefix: q.prefix,
      apiUrl: upstream.url,
    }),
  };
}

describe('breaking migrations', () => {
  it('the database records 0010, 0021, 0026 and 0029 as breaking once migrated', async () => {
    const { rows } = await pool().query<{ tag: string }>('select tag from breaking_migrations order by tag');
    expect(rows.map((r) => r.tag)).toEqual([
      '0010_unchanged_answers_digest',
      '0021_history_added_from_cards',
      '0026_change_events',
      '0029_writer_fence',
    ]);
  });

  it('a worker older than the newest breaking migration refuses to start: one line naming both, exit 3', async () => {
    await pool().query(`insert into breaking_migrations (tag) values ('9999_future_change')`);
    cleanups.push(() => pool().query(`delete from breaking_migrations where tag = '9999_future_change'`));
    const { env } = setup();
    const run = await runCli(['worker', '--exit-when-idle'], env);
    expect(run.code).toBe(3);
    const lines = run.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^cards-sync: cards-sync \S+ knows migrations up to \d{4}_\w+, but the database has breaking migration 9999_future_change: start the newer release$/,
    );
    expect(await liveFleet(pool())).toEqual([]);
  });

  it('a worker with Postgres unreachable or its database missing says so in one line with the fix, exit 1', async () => {
    const { env } = setup();
    const missing = new URL(database.url);
    missing.pathname = '/cards_sync_no_such_database';
    const [refused, absent] = await Promise.all([
      runCli(['worker', '--exit-when-idle'], {
        ...env,
        DATABASE_URL: 'postgres://postgres:postgres@127.0.0.1:5999/x',
      }),
      runCli(['worker', '--exit-when-idle'], { ...env, DATABASE_URL: missing.toString() }),
    ]);
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim()).toBe(
      'cards-sync: cannot reach Postgres at 127.0.0.1:5999/x (ECONNREFUSED); start it (docker compose up -d postgres) or set DATABASE_URL',
    );
    expect(absent.code).toBe(1);
    expect(absent.stderr.trim()).toMatch(
      /^cards-sync: Postgres at [\w.]+:\d+\/cards_sync_no_such_database does not exist; run `cards-sync migrate` first$/,
    );
  });

  it('sync --id older than the newest breaking migration exits 3 with the same line, asks nothing, writes nothing', async () => {
    await pool().query(`insert into breaking_migrations (tag) values ('9999_future_change')`);
    cleanups.push(() => pool().query(`delete from breaking_migrations where tag = '9999_future_change'`));
    upstream.script.set('id:27001', ok([makeCard(27_001)]));
    cleanups.push(async () => upstream.script.delete('id:27001'));
    const { env } = setup();
    const before = await writtenRows();
    const run = await runCli(['sync', '--id', '27001'], env);
    expect(run.code).toBe(3);
    const lines = run.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^cards-sync: cards-sync \S+ knows migrations up to \d{4}_\w+, but the database has breaking migration 9999_future_change: start the newer release$/,
    );
    expect(run.stdout).toBe('');
    expect(upstream.calls.get('id:27001')).toBeUndefined();
    expect(await writtenRows()).toEqual(before);
    // The control: without the newer breaking migration, the same command asks and writes.
    await pool().query(`delete from breaking_migrations where tag = '9999_future_change'`);
    const synced = await runCli(['sync', '--id', '27001'], env);
    expect(synced.code).toBe(0);
    expect(upstream.calls.get('id:27001')).toBe(1);
    expect((await writtenRows()).saved_cards).toBe(before.saved_cards! + 1);
  });

  it('tokens rotate older than the newest breaking migration exits 3 with the same line and re-seals nothing', async () => {
    await pool().query(`insert into breaking_migrations (tag) values ('9999_future_change')`);
    cleanups.push(() => pool().query(`delete from breaking_migrations where tag = '9999_future_change'`));
    const { env } = setup();
    const before = await writtenRows();
    const run = await runCli(['tokens', 'rotate'], env);
    expect(run.code).toBe(3);
    expect(run.stderr.trim()).toMatch(
      /^cards-sync: cards-sync \S+ knows migrations up to \d{4}_\w+, but the database has breaking migration 9999_future_change: start the newer release$/,
    );
    expect(await writtenRows()).toEqual(before);
  });

  it('a running worker that sees a newer breaking migration applied finishes what it runs and exits 3', async () => {
    const { env } = setup();
    const worker = startCli(['worker'], env);
    cleanups.push(async () => {
      if (worker.process.exitCode === null) worker.process.kill('SIGKILL');
      await worker.done;
    });
    await waitFor('the worker in the fleet', async () => (await liveFleet(pool())).length === 1, 20_000);
    await pool().query(`insert into breaking_migrations (tag) values ('9999_future_change')`);
    cleanups.push(() => pool().query(`delete from breaking_migrations where tag = '9999_future_change'`));
    const done = await worker.done; // the next beat (10 s) notices
    expect(done.code).toBe(3);
    expect(done.stderr).toContain('but the database has breaking migration 9999_future_change');
    expect(await liveFleet(pool())).toEqual([]);
  }, 40_000);

  it('migrate refuses a breaking migration while a live process does not know it, and names it', async () => {
    const folder = withTestBreakingMigration();
    const old = await joinFleet(pool(), OLD);
    cleanups.push(() => old.leave());
    const refused = await runMigrations(database.url, { folder }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(BreakingMigrationRefused);
    expect((refused as Error).message).toBe(
      `migration 0099_test_breaking is breaking, and 1 live process does not know it: worker ${old.id} ` +
        '(0.0.9-old, knows up to 0018_breaking_migrations). Stop or upgrade them, or run migrate --wait 10m ' +
        'to wait for them to leave, or --force',
    );
    const marker = await pool().query(`select to_regclass('public.test_breaking_marker') as t`);
    expect(marker.rows[0].t).toBeNull();
    // A process that knows it is no obstacle.
    const current = await joinFleet(pool(), { ...OLD, knownMigration: '0099_test_breaking' });
    cleanups.push(() => current.leave());
    await old.leave();
    expect((await runMigrations(database.url, { folder })).applied).toBe(1);
    const { rows } = await pool().query<{ tag: string }>('select tag from breaking_migrations order by tag');
    expect(rows.map((r) => r.tag)).toEqual([
      '0010_unchanged_answers_digest',
      '0021_history_added_from_cards',
      '0026_change_events',
      '0029_writer_fence',
      '0099_test_breaking',
    ]);
    await pool().query('drop table test_breaking_marker');
    await pool().query(`delete from breaking_migrations where tag = '0099_test_breaking'`);
    // The writer fence went to 0099 with it: back to this release's newest.
    await pool().query('select cards_sync_move_fence((select max(tag) from breaking_migrations))');
    await pool().query(
      `delete from drizzle.__drizzle_migrations where created_at = (select max(created_at) from drizzle.__drizzle_migrations)`,
    );
  });

  it('migrate --wait applies once the old processes leave; --force applies over them and is audited', async () => {
    const folder = withTestBreakingMigration();
    const old = await joinFleet(pool(), OLD);
    cleanups.push(() => old.leave());
    setTimeout(() => void old.leave(), 1500);
    const waited = await runMigrations(database.url, { folder, waitMs: 20_000 });
    expect(waited.applied).toBe(1);
    expect(waited.forced).toBeUndefined();
    await pool().query('drop table test_breaking_marker');
    await pool().query(`delete from breaking_migrations where tag = '0099_test_breaking'`);
    // The writer fence went to 0099 with it: back to this release's newest.
    await pool().query('select cards_sync_move_fence((select max(tag) from breaking_migrations))');
    await pool().query(
      `delete from drizzle.__drizzle_migrations where created_at = (select max(created_at) from drizzle.__drizzle_migrations)`,
    );

    const stubborn = await joinFleet(pool(), OLD);
    cleanups.push(() => stubborn.leave());
    const out: string[] = [];
    const err: string[] = [];
    const io = {
      env: {},
      out: (l: string) => out.push(l),
      err: (l: string) => err.push(l),
      stdin: process.stdin,
      isTTY: false,
      stdoutIsTTY: false,
    };
    const config = loadConfig({ DATABASE_URL: database.url, REDIS_URL: inject('redisUrl') });
    expect(await cmdMigrate(config, io, { force: true, folder })).toBe(0);
    expect(out).toEqual(['applied 1 migration']);
    expect(err.join('\n')).toContain(
      `applied breaking migration 0099_test_breaking with --force over 1 live process`,
    );
    const audit = await pool().query<{
      action: string;
      detail: { migration: string; processes: { id: string }[] };
    }>(`select action, detail from admin_actions where action = 'migrate_force'`);
    expect(audit.rows).toHaveLength(1);
    expect(audit.rows[0]!.detail.migration).toBe('0099_test_breaking');
    expect(audit.rows[0]!.detail.processes.map((p) => p.id)).toEqual([stubborn.id]);
    await pool().query('drop table test_breaking_marker');
    await pool().query(`delete from breaking_migrations where tag = '0099_test_breaking'`);
    // The writer fence went to 0099 with it: back to this release's newest.
    await pool().query('select cards_sync_move_fence((select max(tag) from breaking_migrations))');
    await pool().query(
      `delete from drizzle.__drizzle_migrations where created_at = (select max(created_at) from drizzle.__drizzle_migrations)`,
    );
  });

  it('migrate refuses a malformed --wait with exit 2', async () => {
    const run = await runCli(['migrate', '--wait', 'soon'], { DATABASE_URL: database.url });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--wait takes a duration like 90s or 10m, not "soon"');
  });
});
