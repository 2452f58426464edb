import { randomBytes } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, inject, it, onTestFinished } from 'vitest';
import { withDatabase } from '../../db/databases.js';
import { declareKnownMigration, FENCE_SETTING } from '../../db/fence.js';
import { knownMigration, migrationsFolder, runMigrations } from '../../db/migrate.js';
import { API_KEY, CARD_TOKEN_KEYS, makeCard, ok, useScriptedApi } from '../support/fixtures.js';
import { adminQuery } from '../support/helpers.js';
import { runCli } from '../support/queue-helpers.js';

// The writer fence (migration 0029, docs/upgrading.md "The writer fence"): a release older than
// the database's newest breaking migration, even one that predates every guard of its own, cannot
// write the tables a sync writes. An old release is a session that declares nothing (or an older
// migration) and sends the statements it always sent; it is played here by a plain connection.

const upstream = useScriptedApi();
// A database of its own, made by `cards-sync migrate` as an operator runs it: the fence names the
// release that applied the breaking migration.
const name = `cards_sync_fence_${randomBytes(5).toString('hex')}`;
const url = withDatabase(inject('templateUrl'), name);
afterAll(() => adminQuery(`drop database if exists ${name} with (force)`));

const env = () => ({
  DATABASE_URL: url,
  CARDS_API_BASE_URL: upstream.url,
  CARDS_API_KEY: API_KEY,
  CARD_TOKEN_KEYS,
});

/** A session of its own, declaring `known` the way a release does (undefined: as before the fence). */
async function session<T>(known: string | undefined, work: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    if (known !== undefined) await client.query(declareKnownMigration(known));
    return await work(client);
  } finally {
    await client.end();
  }
}

const refusal = (known: string | undefined, sql: string) =>
  session(known, (c) => c.query(sql)).then(
    () => undefined,
    (error: { message: string; code?: string }) => error,
  );

/** The release's migrations plus a test-only breaking one, in a folder of their own. */
function withBreakingMigration(tag: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'cards-sync-migrations-'));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  cpSync(migrationsFolder(), dir, { recursive: true });
  const journalPath = join(dir, 'meta', '_journal.json');
  const journal = JSON.parse(readFileSync(journalPath, 'utf8')) as {
    entries: { idx: number; version: string; when: number; tag: string; breakpoints: boolean }[];
  };
  const last = journal.entries.at(-1)!;
  journal.entries.push({ ...last, idx: last.idx + 1, when: last.when + 1000, tag });
  writeFileSync(journalPath, JSON.stringify(journal));
  writeFileSync(join(dir, `${tag}.sql`), 'CREATE TABLE "test_breaking_marker" ("id" integer);');
  const record = JSON.parse(readFileSync(join(dir, 'breaking.json'), 'utf8')) as {
    breaking: Record<string, string>;
  };
  record.breaking[tag] = 'test only';
  writeFileSync(join(dir, 'breaking.json'), JSON.stringify(record));
  return dir;
}

const count = (sql: string) => session(undefined, async (c) => Number((await c.query(sql)).rows[0].n));

describe('the writer fence', () => {
  it('cards-sync migrate records which release applied the breaking migrations; this release writes as always', async () => {
    const migrated = await runCli(['migrate'], env());
    expect(migrated.code, migrated.stderr).toBe(0);
    const { rows } = await session(undefined, (c) =>
      c.query<{ tag: string; release: string }>(
        `select tag, release from breaking_migrations where tag = '0029_writer_fence'`,
      ),
    );
    expect(rows).toEqual([{ tag: '0029_writer_fence', release: '0.1.0' }]);

    upstream.script.set('id:4', ok([makeCard(4), makeCard(4), makeCard(4), makeCard(4)]));
    const synced = await runCli(['sync', '--id', '4'], env());
    expect(synced.code, synced.stderr).toBe(0);
    expect(await count('select count(*) as n from saved_cards where subscriber_id = 4')).toBe(4);
  });

  it("refuses an old release's writes to every fenced table, naming the table, the migration and the release to start", async () => {
    const before = await count('select count(*) as n from saved_cards');
    const writes = [
      `insert into saved_cards (id, subscriber_id, card_token, bin_number, card_family, card_bank_code,
         card_bank_name, company_id, create_date, first_seen_at, last_seen_at, updated_at)
       values (9001, 4, 'tok', '4761-xxxx-xxxx-0001', 'Bonus', 1, 'AKBANK', -1, now(), now(), now(), now())`,
      'update saved_cards set removed_at = now() where subscriber_id = 4',
      'delete from saved_card_change_log where subscriber_id = 4',
      'delete from card_conflicts',
    ];
    for (const sql of writes) {
      // Before the fence, a release declared nothing; an older one that declares is as old.
      for (const known of [undefined, '0028_tracing_span_context', 'garbage']) {
        const error = await refusal(known, sql);
        expect(error?.code, sql).toBe('CSF01');
        expect(error?.message).toMatch(
          /^cards-sync: this release may not write (saved_cards|saved_card_change_log|card_conflicts): the database has breaking migration 0029_writer_fence, which it does not know \(it declares .+\); start cards-sync 0\.1\.0 or newer$/,
        );
      }
    }
    expect((await refusal(undefined, writes[0]!))?.message).toContain('(it declares none)');
    expect(await count('select count(*) as n from saved_cards')).toBe(before);
    expect(
      await count('select count(*) as n from saved_cards where subscriber_id = 4 and removed_at is null'),
    ).toBe(4);
  });

  it('lets a release that knows the newest breaking migration write, and moves to each breaking migration migrate applies', async () => {
    const write = 'update saved_cards set updated_at = updated_at where subscriber_id = 4';
    expect(await refusal(knownMigration(), write)).toBeUndefined();
    expect(await refusal('0099_a_later_one', write)).toBeUndefined();
    // A later breaking migration, applied as a later release's migrate applies it: this release
    // is now the old one.
    const folder = withBreakingMigration('0099_test_breaking');
    await runMigrations(url, { folder, release: '9.9.9' });
    const error = await refusal(knownMigration(), write);
    expect(error?.message).toBe(
      `cards-sync: this release may not write saved_cards: the database has breaking migration 0099_test_breaking, which it does not know (it declares ${knownMigration()}); start cards-sync 9.9.9 or newer`,
    );
    expect(await refusal('0099_test_breaking', write)).toBeUndefined();
    // This release's own guard says the same before it writes anything (exit 3).
    const synced = await runCli(['sync', '--id', '4'], env());
    expect(synced.code).toBe(3);
    expect(synced.stderr).toContain('breaking migration 0099_test_breaking');
    // Another writer leaves no trace: what remains is this release's cards.
    expect(await count('select count(*) as n from saved_cards where subscriber_id = 4')).toBe(4);
  });

  it("leaves every read alone: the reporting role's, and an undeclared session's", async () => {
    const analyst = `analyst_${randomBytes(4).toString('hex')}`;
    await session(knownMigration(), async (c) => {
      await c.query(readFileSync(new URL('../../db/reporting-role.sql', import.meta.url), 'utf8'));
      await c.query(`create role ${analyst} login in role cards_sync_reporting`);
    });
    try {
      const asAnalyst = new pg.Client({ connectionString: url, user: analyst });
      await asAnalyst.connect();
      try {
        const { rows } = await asAnalyst.query<{ n: string }>(
          'select count(*) as n from saved_cards_active where subscriber_id = 4',
        );
        expect(Number(rows[0]!.n)).toBe(4);
        const setting = await asAnalyst.query<{ v: string | null }>(
          `select current_setting('${FENCE_SETTING}', true) as v`,
        );
        expect(setting.rows[0]!.v).toBeNull();
      } finally {
        await asAnalyst.end();
      }
      expect(await count('select count(*) as n from subscribers where subscriber_id = 4')).toBe(1);
    } finally {
      await session(knownMigration(), (c) => c.query(`drop role ${analyst}`));
    }
  });
});
