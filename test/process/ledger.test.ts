import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, inject, it } from 'vitest';
import { declareKnownMigration } from '../../db/fence.js';
import { compactClosedDays, dropExpiredPartitions, ledgerPartitions } from '../../db/ledger/index.js';
import { migrationsFolder, runMigrations } from '../../db/migrate.js';
import { LEASE_LOCK_KEY } from '../../db/refresh/lease.js';
import { maintainLedger, startLedgerMaintenance } from '../../jobs/upkeep/ledger.js';
import { judgeLedger } from '../../src/cli/doctor-ledger.js';
import { captureLogger, createTestDatabase, useCleanups, useTestDatabase } from '../support/helpers.js';
import { runCli, waitFor } from '../support/queue-helpers.js';

// The partitioned ledger: days made ahead, retention by whole partitions, rows a clock
// far off put in the default partition and moved into their days, and a ledger of the previous
// release converted in place.

const database = useTestDatabase();
const cleanups = useCleanups();
const pool = () => database.handle.pool;
const DAY = 86_400_000;

async function partitionOf(id: number): Promise<string> {
  const { rows } = await pool().query<{ part: string }>(
    'select tableoid::regclass::text as part from sync_runs where id = $1',
    [id],
  );
  return rows[0]!.part;
}

async function insertRun(at: Date, subscriberId = 1): Promise<number> {
  const { rows } = await pool().query<{ id: string }>(
    `insert into sync_runs (subscriber_id, trigger, started_at, finished_at, status, cards_seen, unchanged)
     values ($1, 'nightly', $2, $2, 'succeeded', 5, 5) returning id`,
    [subscriberId, at],
  );
  return Number(rows[0]!.id);
}

const dayName = (at: Date) => `sync_runs_p${at.toISOString().slice(0, 10).replaceAll('-', '')}`;

describe('the partitioned ledger', () => {
  it('has a partition for today and the week ahead from migrate on, and a run lands in its day', async () => {
    const parts = await ledgerPartitions(pool());
    const now = Date.now();
    for (let d = 0; d <= 6; d++) {
      const at = new Date(now + d * DAY);
      expect(
        parts.some(
          (p) => p.from && p.to && p.from.getTime() <= at.getTime() && at.getTime() < p.to.getTime(),
        ),
      ).toBe(true);
    }
    expect(parts.filter((p) => p.isDefault)).toHaveLength(1);
    expect(await partitionOf(await insertRun(new Date()))).toBe(dayName(new Date()));
  });

  it("a worker's upkeep makes a missing day ahead again, and stops with the worker", async () => {
    const ahead = new Date(Date.now() + 5 * DAY);
    await pool().query(`alter table sync_runs detach partition ${dayName(ahead)}`);
    await pool().query(`drop table ${dayName(ahead)}`);
    const { logger, lines } = captureLogger();
    const upkeep = startLedgerMaintenance(pool(), logger, { retentionDays: 90, everyMs: 60_000 });
    await waitFor('the day to be made again', async () =>
      (await ledgerPartitions(pool())).some((p) => p.name === dayName(ahead)),
    );
    await upkeep.stop();
    expect(lines.filter((l) => l.includes('upkeep failed'))).toEqual([]);
  });

  it('keeps a run of a day with no partition (a clock far off) and moves it into its own day', async () => {
    const far = new Date(Date.now() + 400 * DAY);
    const id = await insertRun(far);
    expect(await partitionOf(id)).toBe('sync_runs_default');
    const done = await maintainLedger(pool(), { retentionDays: 90 });
    expect(done.rehomed).toBe(1);
    expect(await partitionOf(id)).toBe(dayName(far));
    const { rows } = await pool().query('select count(*)::int as n from sync_runs_default');
    expect(rows[0].n).toBe(0);
  });

  it('drops whole days past the retention, never a row of a younger one, and keeps the history', async () => {
    const old = new Date(Date.now() - 100 * DAY);
    const kept = new Date(Date.now() - 80 * DAY);
    await pool().query(`select sync_runs_add_partition($1::date), sync_runs_add_partition($2::date)`, [
      old.toISOString().slice(0, 10),
      kept.toISOString().slice(0, 10),
    ]);
    for (let i = 0; i < 23; i++) await insertRun(old, i);
    const young = await insertRun(kept);
    const today = await insertRun(new Date());
    await pool().query(
      `insert into saved_card_changes (card_id, subscriber_id, change, changed_at, sync_run_id) values (1, 1, 'added', $1, 1)`,
      [old],
    );
    // Retention must not delete a row: any DELETE on the ledger fails while this trigger is there.
    await pool().query(`
      create function refuse_delete() returns trigger language plpgsql as $$
      begin raise exception 'a DELETE on sync_runs'; end $$;
      create trigger refuse_delete before delete on sync_runs for each statement execute function refuse_delete()`);
    cleanups.push(() =>
      pool().query('drop trigger refuse_delete on sync_runs; drop function refuse_delete()'),
    );

    // A card of subscriber 0 listed since then: its as-of on that day leans on the run of that day.
    await pool().query(
      `insert into saved_cards (id, subscriber_id, card_token, bin_number, card_family, card_bank_code,
         card_bank_name, company_id, create_date, first_seen_at, last_seen_at, updated_at)
       values (5, 0, 't', '4506-xxxx-xxxx-2901', 'Axess', 1, 'AKBANK', 1, $1, $1, now(), $1)`,
      [old],
    );
    const asOf = `select last_seen_at, exact from saved_cards_as_of($1::timestamptz + interval '1 hour', 0)`;
    expect((await pool().query(asOf, [old])).rows).toEqual([{ last_seen_at: old, exact: true }]);

    const done = await maintainLedger(pool(), { retentionDays: 90 });
    expect(done.dropped.map((d) => d.name)).toEqual([dayName(old)]);
    // Its run is gone with the day: the answer says it no longer knows, rather than guessing.
    expect((await pool().query(asOf, [old])).rows).toEqual([{ last_seen_at: null, exact: false }]);
    const left = await pool().query<{ id: string }>('select id from sync_runs order by id');
    expect(left.rows.map((r) => Number(r.id))).toEqual(expect.arrayContaining([young, today]));
    const { rows: gone } = await pool().query(
      `select count(*)::int as n from sync_runs where started_at < $1`,
      [new Date(Date.now() - 90 * DAY)],
    );
    expect(gone[0].n).toBe(0);
    expect((await pool().query(`select to_regclass($1) as t`, [dayName(old)])).rows[0].t).toBeNull();
    const history = await pool().query('select count(*)::int as n from saved_card_changes');
    expect(history.rows[0].n).toBe(1);
  });

  it('packs the subscriber index of a day that has ended, once, and leaves today alone', async () => {
    const day = new Date(Date.now() - 30 * DAY);
    await pool().query(`select sync_runs_add_partition($1::date)`, [day.toISOString().slice(0, 10)]);
    // A day's runs come in subscriber order only by chance: the index fills about 70%.
    await pool().query(
      `insert into sync_runs (subscriber_id, trigger, started_at, finished_at, status)
       select hashint4(g) & 65535, 'refresh', $1::timestamptz + g * interval '1 second', $1::timestamptz + g * interval '1 second', 'succeeded'
       from generate_series(1, 20000) g`,
      [day.toISOString().slice(0, 10)],
    );
    const index = `${dayName(day)}_subscriber_id_started_at_idx`;
    const size = async () =>
      Number((await pool().query(`select pg_relation_size($1::regclass) as b`, [index])).rows[0].b);
    const before = await size();
    const done = await compactClosedDays(pool(), { limit: 100, minIndexBytes: 0 });
    expect(done).toContain(dayName(day));
    expect(done).not.toContain(dayName(new Date()));
    expect(await size()).toBeLessThan(before * 0.85);
    // Marked: the next pass leaves it be.
    expect(await compactClosedDays(pool(), { limit: 100, minIndexBytes: 0 })).not.toContain(dayName(day));
    // The rebuilt index answers as the table does.
    const count = async (seqscan: 'on' | 'off') => {
      const client = await pool().connect();
      try {
        await client.query(
          `set enable_seqscan = ${seqscan}; set enable_bitmapscan = ${seqscan === 'on' ? 'off' : 'on'}`,
        );
        const { rows } = await client.query<{ n: number }>(
          `select count(*)::int as n from ${dayName(day)} where subscriber_id between 7 and 900`,
        );
        return rows[0]!.n;
      } finally {
        await client.query('reset all');
        client.release();
      }
    };
    expect(await count('off')).toBe(await count('on'));
    expect(await count('on')).toBeGreaterThan(0);
  });

  it('two workers running the upkeep at once both finish: each day moved or dropped once', async () => {
    const old = new Date(Date.now() - 150 * DAY);
    await pool().query(`select sync_runs_add_partition($1::date)`, [old.toISOString().slice(0, 10)]);
    await insertRun(old);
    const far = new Date(Date.now() + 500 * DAY);
    const stray = await insertRun(far);
    const [a, b] = await Promise.all([
      maintainLedger(pool(), { retentionDays: 90 }),
      maintainLedger(pool(), { retentionDays: 90 }),
    ]);
    expect([...a.dropped, ...b.dropped].map((d) => d.name)).toEqual([dayName(old)]);
    expect(a.rehomed + b.rehomed).toBe(1);
    expect(await partitionOf(stray)).toBe(dayName(far));
  });

  it("two workers' upkeeps at once, one holding the continuous refresh's lease: one makes the day, neither logs a failure", async () => {
    const ahead = new Date(Date.now() + 4 * DAY);
    await pool().query(`alter table sync_runs detach partition ${dayName(ahead)}`);
    await pool().query(`drop table ${dayName(ahead)}`);
    // A worker in REFRESH_MODE=continuous holds the lease, a session lock, all the while.
    const lease = new pg.Client({ connectionString: database.url });
    await lease.connect();
    cleanups.push(() => lease.end());
    expect((await lease.query('select pg_try_advisory_lock($1) as ok', [LEASE_LOCK_KEY])).rows[0].ok).toBe(
      true,
    );
    const { logger, lines } = captureLogger();
    const passes = await Promise.all(
      [1, 2].map(async (n) => {
        const created: string[][] = [];
        const upkeep = startLedgerMaintenance(pool(), logger.child({ worker: n }), {
          retentionDays: 90,
          everyMs: 60_000,
          onPass: (r) => created.push(r.created),
        });
        await waitFor(`worker ${n}'s first pass`, async () => created.length > 0);
        await upkeep.stop();
        return created[0]!;
      }),
    );
    expect(passes.flat()).toEqual([dayName(ahead)]);
    expect(lines.filter((l) => /upkeep failed|lock timeout/.test(l))).toEqual([]);
  });

  it('gives up a detach that would keep writers waiting, and leaves the day for the next pass', async () => {
    const old = new Date(Date.now() - 120 * DAY);
    await pool().query(`select sync_runs_add_partition($1::date)`, [old.toISOString().slice(0, 10)]);
    await insertRun(old);
    // An analyst's long read of the ledger holds its lock until it ends.
    const reader = new pg.Client({ connectionString: database.url });
    await reader.connect();
    cleanups.push(() => reader.end());
    await reader.query('begin');
    await reader.query('select count(*) from sync_runs');
    let retries = 0;
    const refused = await dropExpiredPartitions(pool(), 90, { attempts: 3, onRetry: () => retries++ }).catch(
      (e: { code?: string }) => e,
    );
    expect((refused as { code?: string }).code).toBe('55P03');
    expect(retries).toBe(2);
    // Writers were never shut out: a run written now goes in, and the old day is still whole.
    expect(await partitionOf(await insertRun(new Date()))).toBe(dayName(new Date()));
    expect((await pool().query(`select to_regclass($1) as t`, [dayName(old)])).rows[0].t).not.toBeNull();
    await reader.query('commit');
    expect((await dropExpiredPartitions(pool(), 90)).map((d) => d.name)).toEqual([dayName(old)]);
  });
});

describe('a ledger of the previous release', () => {
  it('is converted in place: rows, ids, views, grants and the as-of answers kept', async () => {
    const { db, client } = await previousRelease();
    expect(
      (await client.query(`select relkind::text from pg_class where relname = 'sync_runs'`)).rows[0].relkind,
    ).toBe('r');

    await client.query(`
      insert into sync_runs (subscriber_id, trigger, started_at, finished_at, status, cards_seen, unchanged)
      select g % 50, 'nightly', now() - (g % 60) * interval '1 day', now() - (g % 60) * interval '1 day', 'succeeded', 5, 5
      from generate_series(1, 3000) g`);
    // One run written under a clock far ahead: it must not stretch the legacy partition over the years.
    await client.query(`insert into sync_runs (subscriber_id, trigger, started_at, finished_at, status)
      values (99, 'manual', '2099-01-01T00:00:00Z', '2099-01-01T00:00:01Z', 'succeeded')`);
    await client.query(`
      insert into saved_cards (id, subscriber_id, card_token, bin_number, card_family, card_bank_code, card_bank_name,
        company_id, create_date, first_seen_at, last_seen_at, updated_at)
      values (77, 7, 't', '4506-xxxx-xxxx-2901', 'Axess', 1, 'AKBANK', 1, now(), now() - interval '59 days',
        now() - interval '59 days', now() - interval '59 days')`);
    await client.query(`
      insert into saved_card_changes (card_id, subscriber_id, change, changed_at)
      values (77, 7, 'added', now() - interval '59 days')`);
    await client.query(
      `insert into subscribers (subscriber_id, email) values (7, 'Ayse@Example.com'), (8, null)`,
    );
    await client.query(readFileSync('db/reporting-role.sql', 'utf8'));
    const asOf = `select id, last_seen_at, exact from saved_cards_as_of(now() - interval '30 days', 7)`;
    const before = (await client.query(asOf)).rows;
    const maxBefore = Number((await client.query('select max(id) as m from sync_runs')).rows[0].m);

    await runMigrations(db.url);

    // The e-mail index holds e-mails only (0022, built beside the old one first), and still refuses
    // a second subscriber with the same address.
    expect(
      (
        await client.query(
          `select indexname, indexdef from pg_indexes where tablename = 'subscribers' and indexname like '%email%'`,
        )
      ).rows,
    ).toEqual([
      {
        indexname: 'subscribers_email_lower_idx',
        indexdef: expect.stringMatching(/UNIQUE INDEX .* \(lower\(email\)\) WHERE \(email IS NOT NULL\)$/),
      },
    ]);
    await expect(
      client.query(`insert into subscribers (subscriber_id, email) values (9, 'ayse@example.com')`),
    ).rejects.toMatchObject({ code: '23505' });

    const parts = await ledgerPartitions(client);
    const legacy = parts.find((p) => p.name === 'sync_runs_legacy');
    expect(legacy?.from).toBeNull();
    expect(legacy?.to?.getTime()).toBeGreaterThan(Date.now());
    expect(legacy?.to?.getTime()).toBeLessThanOrEqual(Date.now() + 2 * DAY);
    expect(parts.some((p) => p.from !== null && p.from.getTime() > Date.now() + 5 * DAY)).toBe(true);
    expect((await client.query('select count(*)::int as n from sync_runs')).rows[0].n).toBe(3001);
    expect(
      (await client.query(`select tableoid::regclass::text as part from sync_runs where subscriber_id = 99`))
        .rows,
    ).toEqual([{ part: 'sync_runs_default' }]);
    await client.query('delete from sync_runs where subscriber_id = 99');
    const { rows: next } = await client.query<{ id: string }>(
      `insert into sync_runs (subscriber_id, trigger, started_at, finished_at, status) values (1, 'manual', now(), now(), 'succeeded') returning id`,
    );
    expect(Number(next[0]!.id)).toBeGreaterThan(maxBefore);
    expect((await client.query(asOf)).rows).toEqual(before);
    expect(before[0].last_seen_at).not.toBeNull();
    // The reporting role reads the view and its columns of the new table as before.
    await client.query('set role cards_sync_reporting');
    expect((await client.query('select count(*)::int as n from sync_runs_report')).rows[0].n).toBe(3001);
    expect(
      (await client.query('select count(*)::int as n from sync_runs where status = $1', ['succeeded']))
        .rows[0].n,
    ).toBe(3001);
    await expect(client.query('select email from sync_runs limit 1')).rejects.toThrow(/permission denied/);
    // The history written before 0021 reads as it did: one 'added' row for the card, not two.
    expect(
      (await client.query(`select change, subscriber_id::int from saved_card_changes where card_id = 77`))
        .rows,
    ).toEqual([{ change: 'added', subscriber_id: 7 }]);
    await client.query('reset role');
    // The check the conversion leaned on is the legacy partition's alone now.
    expect(
      (
        await client.query(
          `select conrelid::regclass::text as t from pg_constraint where conname = 'sync_runs_before_partitioning'`,
        )
      ).rows,
    ).toEqual([{ t: 'sync_runs_legacy' }]);
  });
});

describe('a ledger of the previous release, prepared while writers go on', () => {
  it('is checked and indexed before the migration, which then only renames and attaches', async () => {
    const { db, client } = await previousRelease();
    await client.query(`
      insert into sync_runs (subscriber_id, trigger, started_at, finished_at, status)
      select g, 'nightly', now() - g * interval '1 hour', now() - g * interval '1 hour', 'succeeded'
      from generate_series(1, 100) g`);
    // What a migrate killed after its preparation leaves: a CHECK whose cutoff will come. A worker's
    // upkeep drops it once the cutoff is less than a day away, before it can refuse a run.
    const leftover = (hours: number) =>
      client.query(
        `alter table sync_runs drop constraint if exists sync_runs_before_partitioning;
         alter table sync_runs add constraint sync_runs_before_partitioning
           check (started_at < '${new Date(Date.now() + hours * 3_600_000).toISOString()}') not valid`,
      );
    const pool = new pg.Pool({ connectionString: db.url, max: 2 });
    const checks = async () =>
      (await client.query(`select 1 from pg_constraint where conname = 'sync_runs_before_partitioning'`)).rows
        .length;
    await leftover(47);
    await maintainLedger(pool, { retentionDays: 90 });
    expect(await checks()).toBe(1);
    await leftover(12);
    await maintainLedger(pool, { retentionDays: 90 });
    expect(await checks()).toBe(0);
    await pool.end();
    await runMigrations(db.url);
    // The prepared cutoff is two UTC midnights on (the migration's own would be one), and the
    // indexes it built beforehand are the legacy partition's.
    const legacy = (await ledgerPartitions(client)).find((p) => p.name === 'sync_runs_legacy')!;
    expect(legacy.to!.getTime() - Date.now()).toBeGreaterThan(DAY);
    const { rows } = await client.query<{ indexname: string }>(
      `select indexname from pg_indexes where tablename = 'sync_runs_legacy' order by 1`,
    );
    expect(rows.map((r) => r.indexname)).toContain('sync_runs_legacy_started_id_idx');
    expect((await client.query('select count(*)::int as n from sync_runs')).rows[0].n).toBe(100);
  });
});

/** A database of the previous release (migrated to 0018), and a client on it. */
async function previousRelease() {
  const db = await createTestDatabase();
  cleanups.push(() => db.drop());
  // The template is migrated already: start again from an empty database at 0018.
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  cleanups.push(() => client.end());
  // After the migration this client checks the result as this release: past the writer fence.
  await client.query(declareKnownMigration());
  await client.query('drop schema public cascade; drop schema drizzle cascade; create schema public');
  await runMigrations(db.url, { folder: releaseBefore('0019_ledger_partitions') });
  return { db, client };
}

/** The release's migrations up to (not including) `tag`, in a folder of their own. */
function releaseBefore(tag: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'cards-sync-migrations-'));
  cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
  cpSync(migrationsFolder(), dir, { recursive: true });
  const journalPath = join(dir, 'meta', '_journal.json');
  const journal = JSON.parse(readFileSync(journalPath, 'utf8')) as { entries: { tag: string }[] };
  const at = journal.entries.findIndex((e) => e.tag === tag);
  journal.entries = journal.entries.slice(0, at);
  writeFileSync(journalPath, JSON.stringify(journal));
  return dir;
}

describe('doctor on the ledger', () => {
  const part = (name: string, from: string | null, to: string | null) => ({
    name,
    from: from === null ? null : new Date(from),
    to: to === null ? null : new Date(to),
    isDefault: to === null,
    estimatedRows: 0,
    bytes: 0,
  });
  const now = new Date('2026-11-25T10:00:00Z');
  const week = [
    part('sync_runs_legacy', null, '2026-11-20T00:00:00Z'),
    ...Array.from({ length: 12 }, (_, i) => {
      const from = new Date(Date.parse('2026-11-20T00:00:00Z') + i * DAY);
      return part(dayName(from), from.toISOString(), new Date(from.getTime() + DAY).toISOString());
    }),
    part('sync_runs_default', null, null),
  ];

  it('is content with days ahead, an empty default and nothing past the retention', () => {
    expect(judgeLedger(week, { now, retentionDays: 90, defaultRows: 0 })).toEqual({
      verdict: 'ok',
      name: 'ledger',
      says: '12 day partitions and sync_runs_legacy (the ledger before 0019) from 2026-11-20, 6 days ahead, nothing in the default partition',
    });
  });

  it('warns of each thing the upkeep has not done, and says who does it', () => {
    const later = new Date(now.getTime() + 6 * DAY);
    const check = judgeLedger(week, { now: later, retentionDays: 3, defaultRows: 4 });
    expect(check.verdict).toBe('WARN');
    expect(check.says).toContain('only 0 day(s) of partitions ahead');
    expect(check.says).toContain('4 run(s) in sync_runs_default');
    expect(check.says).toContain('partition(s) past SYNC_RUNS_RETENTION_DAYS=3 still kept');
    expect(check.says).toMatch(/a running worker's hourly upkeep sees to it$/);
  });

  it('cards-sync doctor prints the ledger line', async () => {
    const run = await runCli(['doctor'], { DATABASE_URL: database.url, REDIS_URL: inject('redisUrl') });
    expect(run.stdout).toMatch(
      /^ok\s+ledger\s+\d+ day partitions from \d{4}-\d\d-\d\d, \d+ days ahead, nothing in the default partition$/m,
    );
  });
});
