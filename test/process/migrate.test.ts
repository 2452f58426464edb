import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { declareKnownMigration } from '../../db/fence.js';
import { migrationsFolder, runMigrations } from '../../db/migrate.js';
import { archiveLog } from '../support/log-archive.js';

// `cards-sync migrate` as ops run it: a child process against a database that may not exist yet.

const BIN = fileURLToPath(new URL('../../bin/cards-sync.js', import.meta.url));
const JOURNAL = fileURLToPath(new URL('../../db/migrations/meta/_journal.json', import.meta.url));

/** saved_card_changes (a view since 0021) and the log it reads have the same columns. */
const HISTORY_COLUMNS = [
  'id',
  'card_id',
  'subscriber_id',
  'change',
  'changed_fields',
  'previous',
  'reason',
  'sync_run_id',
  'changed_at',
];

/** docs/analytics.md: the public column names analysts query. */
const DOCUMENTED_COLUMNS: Record<string, string[]> = {
  admin_actions: ['id', 'at', 'actor', 'source', 'action', 'detail'],
  // Breaking migrations applied.
  breaking_migrations: ['tag', 'applied_at', 'release'],
  // The fleet registry.
  fleet_processes: [
    'id',
    'role',
    'host',
    'pid',
    'version',
    'known_migration',
    'key_ids',
    'concurrency',
    'settings',
    'started_at',
    'last_beat_at',
  ],
  // The change events' outbox, partitioned by day.
  change_events: [
    'id',
    'seq',
    'txid',
    'subscriber_id',
    'created_at',
    'aggregatetype',
    'aggregateid',
    'type',
    'payload',
    // The writing sync's trace context, while tracing is on (migration 0028).
    'tracingspancontext',
  ],
  // Webhooks: endpoints, one delivery per event and endpoint, one row per attempt.
  webhook_endpoints: [
    'id',
    'url',
    'description',
    'event_types',
    'enabled',
    'disabled_reason',
    'disabled_at',
    'secret',
    'previous_secret',
    'previous_secret_expires_at',
    'feed_cursor',
    'failing_since',
    'created_at',
    // `webhooks remove` (migration 0030).
    'removed_at',
  ],
  webhook_deliveries: [
    'id',
    'endpoint_id',
    'event_id',
    'subscriber_id',
    'type',
    'event_at',
    'body',
    'status',
    'attempts',
    'next_attempt_at',
    'first_attempt_at',
    'locked_by',
    'locked_until',
    'finished_at',
    'replay',
    'created_at',
    'tracingspancontext',
  ],
  webhook_attempts: [
    'id',
    'delivery_id',
    'endpoint_id',
    'attempt',
    'at',
    'outcome',
    'status_code',
    'error_code',
    'latency_ms',
    'excerpt',
  ],
  card_conflicts: [
    'id',
    'card_id',
    'holder_subscriber_id',
    'claimant_subscriber_id',
    'opened_at',
    'last_seen_at',
    'resolved_at',
    'resolution',
  ],
  saved_cards: [
    'id',
    'subscriber_id',
    'card_token',
    // The keyed fingerprint beside the sealed token (docs/analytics.md allows it).
    'card_token_fingerprint',
    'bin_number',
    'card_family',
    'card_bank_code',
    'card_bank_name',
    'company_id',
    'create_date',
    'first_seen_at',
    'last_seen_at',
    'updated_at',
    'removed_at',
    // What the history view makes a card's 'added' row from (migration 0021).
    'added_change_id',
    'added_sync_run_id',
    'added_subscriber_id',
  ],
  subscribers: [
    'subscriber_id',
    'email',
    'last_synced_at',
    'last_success_at',
    'last_status',
    'last_error',
    'consecutive_failures',
    'active_cards',
    'consecutive_not_found',
    'gone_at',
    // The digest of the last answer applied in full (migration 0010).
    'cards_digest',
    // The freshness model (migration 0015, docs/analytics.md), and what it is estimated from.
    'change_rate_per_day',
    'next_refresh_at',
    'change_observations',
    // The rate the estimate reads (migration 0038).
    'stale_rate_per_day',
  ],
  // The continuous refresh's queue (migration 0025).
  subscriber_schedule: ['subscriber_id', 'due_at', 'leased_until'],
  sync_runs: [
    'id',
    'subscriber_id',
    'email',
    'trigger',
    'job_id',
    'refresh_run_id',
    'started_at',
    'finished_at',
    'status',
    'cards_seen',
    'inserted',
    'updated',
    'unchanged',
    'removed',
    'restored',
    'error_code',
    'error_message',
  ],
  // The history as written: saved_card_changes, a view, adds each card's 'added' row.
  saved_card_change_log: HISTORY_COLUMNS,
  // §4 lists no key for the history; `id` is its identity primary key.
  saved_card_changes: HISTORY_COLUMNS,
  // The nightly-refresh ledger and the analysts' views.
  refresh_policy: [
    'id',
    'mode',
    'threshold_days',
    'prior_rate_per_day',
    'prior_mixture',
    'max_age_seconds',
    'budget_per_sec',
    'audit_share',
    'subscribers',
    'keeps_max_age',
    'max_age_needs_per_sec',
    'coverage_days',
    'spend_plan',
    'spend_coverage',
    'audit_action',
    'expected_changed_share',
    'expected_since',
    'expected_from',
    'min_interval_days',
    'stamped_at',
    'computed_at',
  ],
  refresh_runs: [
    'id',
    'trigger',
    'status',
    'started_at',
    'fanout_finished_at',
    'finished_at',
    'stale_before',
    'cursor',
    'cursor_due',
    'subscribers_total',
    'enqueued',
    'already_queued',
    'succeeded',
    'failed',
    'not_found',
    'invalid',
    'cards_added',
    'cards_removed',
    'cards_restored',
    'wiped_subscribers',
    'last_sync_run_id',
    'halted_reason',
    'breaker_overridden',
    'job_id',
    'planned_subscribers',
    'rate_budget_per_sec',
    'expected_finish_at',
    'next_refresh_at',
    // where the run's sync_runs rows begin (its close reads them by id).
    'prior_sync_run_id',
  ],
  saved_cards_active: [
    'id',
    'subscriber_id',
    'bin_number',
    'card_family',
    'card_bank_code',
    'card_bank_name',
    'company_id',
    'create_date',
    'first_seen_at',
    'last_seen_at',
    'updated_at',
  ],
  // One row per card version (migration 0009).
  saved_card_history: [
    'card_id',
    'subscriber_id',
    'bin_number',
    'card_family',
    'card_bank_code',
    'card_bank_name',
    'company_id',
    'create_date',
    'first_seen_at',
    'updated_at',
    'valid_from',
    'valid_to',
    'is_current',
    'exact',
    // The card's id by the name saved_cards_as_of gives it (migration 0023); card_id stays.
    'id',
  ],
  // The analysts' tables without e-mail addresses.
  subscribers_report: [
    'subscriber_id',
    'last_synced_at',
    'last_success_at',
    'last_status',
    'last_error',
    'consecutive_failures',
    'active_cards',
    'consecutive_not_found',
    'gone_at',
    // The freshness model's columns (migration 0024), as in subscribers: every column but email
    // and cards_digest.
    'change_rate_per_day',
    'next_refresh_at',
    'change_observations',
    'stale_rate_per_day',
  ],
  sync_runs_report: [
    'id',
    'subscriber_id',
    'trigger',
    'job_id',
    'refresh_run_id',
    'started_at',
    'finished_at',
    'status',
    'cards_seen',
    'inserted',
    'updated',
    'unchanged',
    'removed',
    'restored',
    'error_code',
    'error_message',
  ],
  subscriber_freshness: [
    'subscriber_id',
    'last_success_at',
    'age',
    'last_synced_at',
    'last_status',
    'consecutive_failures',
    'active_cards',
  ],
};

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function migrate(databaseUrl: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, 'migrate'], {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: process.env.HOME ?? tmpdir(),
        DATABASE_URL: databaseUrl,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => {
      stdout += s;
    });
    child.stderr.setEncoding('utf8').on('data', (s: string) => {
      stderr += s;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      archiveLog('cards-sync migrate', stdout + stderr);
      resolve({ code, stdout, stderr });
    });
  });
}

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${encodeURIComponent(name)}`;
  return u.toString();
}

const quoteIdent = (name: string) => `"${name.replace(/"/g, '""')}"`;

async function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    // Writes as this release does, past the writer fence (db/fence.ts).
    await client.query(declareKnownMigration());
    return await fn(client);
  } finally {
    await client.end();
  }
}

const maintenanceUrl = () => withDatabase(inject('templateUrl'), 'postgres');
const created: string[] = [];

/** A database name nobody has used; dropped after the file. */
function freshName(prefix = 'cards_sync_mig'): string {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  created.push(name);
  return name;
}

afterAll(async () => {
  await withClient(maintenanceUrl(), async (client) => {
    for (const name of created)
      await client.query(`drop database if exists ${quoteIdent(name)} with (force)`);
  });
});

async function databaseExists(name: string): Promise<boolean> {
  return withClient(maintenanceUrl(), async (client) => {
    const { rows } = await client.query('select 1 from pg_database where datname = $1', [name]);
    return rows.length === 1;
  });
}

async function columnsByTable(url: string): Promise<Record<string, string[]>> {
  return withClient(url, async (client) => {
    const { rows } = await client.query<{ table_name: string; column_name: string }>(
      // The ledger's partitions are sync_runs's storage, not tables of their own.
      `select table_name, column_name from information_schema.columns
       where table_schema = 'public'
         and table_name not in (select relname from pg_class where relispartition)
       order by table_name, column_name`,
    );
    const byTable: Record<string, string[]> = {};
    for (const r of rows) byTable[r.table_name] = [...(byTable[r.table_name] ?? []), r.column_name];
    return byTable;
  });
}

const migrationCount = (JSON.parse(readFileSync(JOURNAL, 'utf8')) as { entries: unknown[] }).entries.length;

describe('cards-sync migrate', () => {
  const name = freshName();
  const url = () => withDatabase(inject('templateUrl'), name);

  it('creates a missing database and the tables and views with exactly the columns docs/analytics.md names', async () => {
    expect(await databaseExists(name)).toBe(false);
    const run = await migrate(url());
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/created the database/);
    expect(await databaseExists(name)).toBe(true);
    const columns = await columnsByTable(url());
    const expected = Object.fromEntries(
      Object.entries(DOCUMENTED_COLUMNS).map(([table, cols]) => [table, [...cols].sort()]),
    );
    expect(columns).toEqual(expected);
  });

  it('stores ids and amounts as bigint and every time as timestamptz', async () => {
    const types = await withClient(url(), async (client) => {
      const { rows } = await client.query<{ column_name: string; data_type: string }>(
        `select column_name, data_type from information_schema.columns
         where table_schema = 'public' and table_name = 'saved_cards'`,
      );
      return Object.fromEntries(rows.map((r) => [r.column_name, r.data_type]));
    });
    for (const col of ['id', 'subscriber_id', 'card_bank_code', 'company_id']) {
      expect(types[col], col).toBe('bigint');
    }
    for (const col of ['create_date', 'first_seen_at', 'last_seen_at', 'updated_at', 'removed_at']) {
      expect(types[col], col).toBe('timestamp with time zone');
    }
  });

  it('run again: says the migrations are up to date, exits 0 and changes nothing', async () => {
    const before = await columnsByTable(url());
    const run = await migrate(url());
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/up to date/);
    expect(run.stdout).not.toMatch(/created/);
    expect(await columnsByTable(url())).toEqual(before);
    const applied = await withClient(url(), async (client) => {
      const { rows } = await client.query<{ n: number }>(
        'select count(*)::int as n from drizzle.__drizzle_migrations',
      );
      return rows[0]!.n;
    });
    expect(applied).toBe(migrationCount);
  });
});

describe('five migrate processes at once on a missing database', () => {
  it('all exit 0 and leave one set of tables and one row per migration', async () => {
    const name = freshName();
    const url = withDatabase(inject('templateUrl'), name);
    const runs = await Promise.all(Array.from({ length: 5 }, () => migrate(url)));
    for (const run of runs) expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    // Exactly one of them created the database; the others found it there.
    expect(runs.filter((r) => /created the database/.test(r.stdout))).toHaveLength(1);
    // Between them they applied every migration once (whoever held the lock first did the work).
    const applied = runs.map((r) => Number(/applied (\d+) migration/.exec(r.stdout)?.[1] ?? 0));
    expect(applied.reduce((a, b) => a + b, 0)).toBe(migrationCount);
    const columns = await columnsByTable(url);
    expect(Object.keys(columns).sort()).toEqual(Object.keys(DOCUMENTED_COLUMNS).sort());
    const { tables, migrations } = await withClient(url, async (client) => {
      const t = await client.query<{ n: number }>(
        `select count(*)::int as n from pg_tables t join pg_class c on c.oid = (t.schemaname || '.' || t.tablename)::regclass
         where t.schemaname = 'public' and not c.relispartition`,
      );
      const m = await client.query<{ hash: string; n: number }>(
        'select hash, count(*)::int as n from drizzle.__drizzle_migrations group by hash',
      );
      return { tables: t.rows[0]!.n, migrations: m.rows };
    });
    expect(tables).toBe(15);
    expect(migrations).toHaveLength(migrationCount);
    expect(migrations.every((m) => m.n === 1)).toBe(true);
  });
});

describe('migrate edge cases', () => {
  it('creates a database whose name needs quoting (capitals and hyphens) under exactly that name', async () => {
    const name = freshName('Cards-Sync-Mig');
    const url = withDatabase(inject('templateUrl'), name);
    const run = await migrate(url);
    expect(run.code, run.stderr).toBe(0);
    expect(await databaseExists(name)).toBe(true);
    expect(Object.keys(await columnsByTable(url)).sort()).toEqual(Object.keys(DOCUMENTED_COLUMNS).sort());
  });

  it('Postgres unreachable: exits 1 naming Postgres and what to do', async () => {
    const run = await migrate('postgres://postgres:not-shown-pass@127.0.0.1:1/cards_sync');
    expect(run.code, run.stderr).toBe(1);
    expect(run.stdout).toBe('');
    const plain = run.stderr.split('\n').filter((l) => l.trim() !== '');
    expect(plain).toHaveLength(1);
    expect(plain[0]).toMatch(/Postgres/);
    expect(plain[0]).toMatch(/DATABASE_URL/);
    expect(run.stderr).not.toContain('not-shown-pass');
  });
});

/** The release's migrations before `tag`, in a folder of their own (removed after the file). */
function releaseBefore(tag: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'cards-sync-migrations-'));
  folders.push(dir);
  cpSync(migrationsFolder(), dir, { recursive: true });
  const journalPath = join(dir, 'meta', '_journal.json');
  const journal = JSON.parse(readFileSync(journalPath, 'utf8')) as { entries: { tag: string }[] };
  const at = journal.entries.findIndex((e) => e.tag === tag);
  expect(at, tag).toBeGreaterThan(0);
  journal.entries = journal.entries.slice(0, at);
  writeFileSync(journalPath, JSON.stringify(journal));
  return dir;
}
const folders: string[] = [];
afterAll(() => {
  for (const dir of folders) rmSync(dir, { recursive: true, force: true });
});

describe('from the previous migration (0023) to 0024', () => {
  it("subscribers_report gains the freshness columns, with the rows' values, and the reporting role keeps its grant", async () => {
    const name = freshName();
    const url = withDatabase(inject('templateUrl'), name);
    await runMigrations(url, { folder: releaseBefore('0024_subscribers_report_freshness') });
    const analyst = `analyst_${randomBytes(4).toString('hex')}`;
    await withClient(url, async (client) => {
      await client.query(
        `insert into subscribers (subscriber_id, last_success_at, change_rate_per_day, next_refresh_at, change_observations)
         values (7, now(), 0.25, '2026-12-01T00:00:00Z', '{1.5,-2}')`,
      );
      await client.query(readFileSync(new URL('../../db/reporting-role.sql', import.meta.url), 'utf8'));
      await client.query(`create role ${analyst} login in role cards_sync_reporting`);
    });
    try {
      const run = await migrate(url);
      expect(run.code, run.stderr).toBe(0);
      // 0024 and the migrations after it.
      expect(run.stdout).toMatch(/applied \d+ migration/);
      // As the reporting role, without db/reporting-role.sql run again.
      const asAnalyst = new URL(url);
      asAnalyst.username = analyst;
      asAnalyst.password = 'any';
      const rows = await withClient(asAnalyst.toString(), async (client) => {
        const { rows } = await client.query(
          'select subscriber_id, change_rate_per_day, next_refresh_at, change_observations from subscribers_report',
        );
        return rows;
      });
      expect(rows).toEqual([
        {
          subscriber_id: '7',
          change_rate_per_day: 0.25,
          next_refresh_at: new Date('2026-12-01T00:00:00Z'),
          change_observations: [1.5, -2],
        },
      ]);
    } finally {
      await withClient(url, (client) => client.query(`drop owned by ${analyst}; drop role ${analyst}`));
    }
  });
});

describe('from the previous migration (0024) to 0025', () => {
  it("copies each subscriber's due time into subscriber_schedule, which the reporting role reads; a new subscriber gets its row", async () => {
    const name = freshName();
    const url = withDatabase(inject('templateUrl'), name);
    await runMigrations(url, { folder: releaseBefore('0025_subscriber_schedule') });
    const analyst = `analyst_${randomBytes(4).toString('hex')}`;
    await withClient(url, async (client) => {
      await client.query(
        `insert into subscribers (subscriber_id, next_refresh_at) values (7, '2026-12-01T00:00:00Z'), (8, null)`,
      );
      await client.query(readFileSync(new URL('../../db/reporting-role.sql', import.meta.url), 'utf8'));
      await client.query(`create role ${analyst} login in role cards_sync_reporting`);
    });
    try {
      const run = await migrate(url);
      expect(run.code, run.stderr).toBe(0);
      // 0025, and the migrations after it.
      expect(run.stdout).toMatch(/applied \d+ migrations?/);
      await withClient(url, (client) =>
        client.query(
          `insert into subscribers (subscriber_id, next_refresh_at) values (9, '2026-12-02T00:00:00Z')`,
        ),
      );
      const asAnalyst = new URL(url);
      asAnalyst.username = analyst;
      asAnalyst.password = 'any';
      const rows = await withClient(asAnalyst.toString(), async (client) => {
        const { rows } = await client.query(
          'select subscriber_id, due_at from subscriber_schedule order by 1',
        );
        return rows;
      });
      expect(rows).toEqual([
        { subscriber_id: '7', due_at: new Date('2026-12-01T00:00:00Z') },
        { subscriber_id: '8', due_at: null },
        { subscriber_id: '9', due_at: new Date('2026-12-02T00:00:00Z') },
      ]);
      const indexes = await withClient(url, async (client) => {
        const { rows } = await client.query<{ indexname: string }>(
          `select indexname from pg_indexes where tablename in ('subscribers', 'subscriber_schedule') order by 1`,
        );
        return rows.map((r) => r.indexname);
      });
      expect(indexes).toEqual([
        'subscriber_schedule_due_idx',
        'subscriber_schedule_pkey',
        'subscribers_email_lower_idx',
        'subscribers_pkey',
      ]);
    } finally {
      await withClient(url, (client) => client.query(`drop owned by ${analyst}; drop role ${analyst}`));
    }
  });
});
