import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { declareKnownMigration } from '../../db/fence.js';
import { startRefreshRun } from '../../db/refresh/index.js';
import { createApiClient } from '../../src/api/index.js';
import { syncSubscriber } from '../../src/sync/index.js';
import { API_KEY, makeCard, ok, testTokens, useScriptedApi } from '../support/fixtures.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';

// The analysts' surface: views without tokens, and a role that cannot read the token column.

const database = useTestDatabase();
const upstream = useScriptedApi();
const analyst = `analyst_${randomBytes(4).toString('hex')}`;
let asAnalyst: pg.Client;
// 80001 keeps two cards (one with a token an analyst must never see); 80002's one card is removed.
const kept = [makeCard(80_001, { cardToken: 'deadbeef'.repeat(4) }), makeCard(80_001)];
const removed = makeCard(80_002, { binNumber: '5400-xxxx-xxxx-0011', cardBankName: 'ISBANK' });
let refreshRunId: number;

async function asOwner(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  try {
    await client.query(declareKnownMigration());
    await client.query(sql);
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  const api = createApiClient({
    baseUrl: upstream.url,
    apiKey: API_KEY,
    pathStyle: 'standard',
    timeoutMs: 2000,
  });
  upstream.script.set('id:80001', ok(kept));
  upstream.script.set('id:80002', ok([removed]));
  const { logger } = captureLogger();
  for (const id of [80_001, 80_002]) {
    await syncSubscriber(
      { db: database.handle.db, api, logger, tokens: testTokens },
      { target: { subscriberId: id }, trigger: 'manual' },
    );
  }
  upstream.script.set('id:80002', ok([]));
  await syncSubscriber(
    { db: database.handle.db, api, logger, tokens: testTokens },
    { target: { subscriberId: 80_002 }, trigger: 'manual' },
  );
  await api.close();
  // One finished refresh, for the guide's "last refreshes" query.
  const run = await startRefreshRun(database.handle.db, { trigger: 'manual' });
  if (!run.started) throw new Error('a refresh run was already in progress');
  refreshRunId = run.run.id;
  await asOwner(
    `update refresh_runs set status = 'completed', finished_at = now(), subscribers_total = 2, succeeded = 1,
       failed = 0, not_found = 1, invalid = 0 where id = ${refreshRunId}`,
  );
  await asOwner(readFileSync(new URL('../../db/reporting-role.sql', import.meta.url), 'utf8'));
  // Applying it twice is safe.
  await asOwner(readFileSync(new URL('../../db/reporting-role.sql', import.meta.url), 'utf8'));
  await asOwner(`create role ${analyst} login in role cards_sync_reporting`);
  const url = new URL(database.url);
  url.username = analyst;
  url.password = 'any';
  asAnalyst = new pg.Client({ connectionString: url.toString() });
  await asAnalyst.connect();
});

afterAll(async () => {
  await asAnalyst?.end();
  await asOwner(`drop role if exists ${analyst}`);
});

describe('reporting surface', () => {
  it('the analyst role cannot read card_token, in any way', async () => {
    await expect(asAnalyst.query('select card_token from saved_cards')).rejects.toMatchObject({
      code: '42501',
    });
    await expect(asAnalyst.query('select * from saved_cards')).rejects.toMatchObject({ code: '42501' });
  });

  it('reads every other column of saved_cards', async () => {
    const { rows } = await asAnalyst.query(
      'select id, subscriber_id, bin_number, card_bank_name, removed_at from saved_cards order by id',
    );
    expect(
      rows.map((r) => [
        Number(r.id),
        Number(r.subscriber_id),
        r.bin_number,
        r.card_bank_name,
        r.removed_at !== null,
      ]),
    ).toEqual([
      [kept[0]!.id, 80_001, '4761-xxxx-xxxx-0043', 'AKBA', false],
      [kept[1]!.id, 80_001, '4761-xxxx-xxxx-0043', 'AKBA', false],
      [removed.id, 80_002, '5400-xxxx-xxxx-0011', 'ISBANK', true],
    ]);
  });

  it('saved_cards_active lists active cards only, without a token column', async () => {
    const { rows, fields } = await asAnalyst.query('select * from saved_cards_active order by id');
    expect(fields.map((f) => f.name)).not.toContain('card_token');
    expect(rows.map((r) => Number(r.subscriber_id))).toEqual([80_001, 80_001]);
    expect(JSON.stringify(rows)).not.toContain('deadbeef');
  });

  it('subscriber_freshness shows last success, age, status and failures', async () => {
    const { rows } = await asAnalyst.query(
      'select subscriber_id, last_success_at, age, last_status, consecutive_failures, active_cards from subscriber_freshness order by subscriber_id',
    );
    expect(
      rows.map((r) => [Number(r.subscriber_id), r.last_status, r.consecutive_failures, r.active_cards]),
    ).toEqual([
      [80_001, 'succeeded', 0, 2],
      [80_002, 'succeeded', 0, 0],
    ]);
    // Synced moments ago: the age is now() - last_success_at, a few seconds, not null.
    const ages = await asAnalyst.query(
      'select subscriber_id, last_success_at, extract(epoch from age)::float8 as seconds from subscriber_freshness order by subscriber_id',
    );
    for (const r of ages.rows) {
      expect(r.last_success_at).toBeInstanceOf(Date);
      expect(r.seconds).toBeGreaterThanOrEqual(0);
      expect(r.seconds).toBeLessThan(3600);
    }
  });

  it("the analytics guide's example queries run as the analyst", async () => {
    const readme = readFileSync(new URL('../../docs/analytics.md', import.meta.url), 'utf8');
    const block = /```sql\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(block).toBeDefined();
    const queries = block!
      .split(';')
      .map((q) => q.replace(/--.*$/gm, '').trim())
      .filter(Boolean);
    expect(queries).toHaveLength(4);
    const [perBank, addedPerDay, stale, lastRefreshes] = queries.map((q) => q!);

    // Active cards per bank: 80001's two AKBA cards; 80002's removed ISBANK card is not active.
    const banks = await asAnalyst.query(perBank!);
    expect(banks.rows.map((r) => [Number(r.card_bank_code), r.bank, Number(r.cards)])).toEqual([
      [100_100_000, 'AKBA', 2],
    ]);

    // Cards added per day: the three cards the syncs added, all within the seeded day(s).
    const added = await asAnalyst.query(addedPerDay!);
    expect(added.rows.every((r) => r.day instanceof Date)).toBe(true);
    expect(added.rows.reduce((n, r) => n + Number(r.added), 0)).toBe(3);

    // Stale subscribers: none while both synced just now; 80002 once its last success is two days old.
    expect((await asAnalyst.query(stale!)).rows).toEqual([]);
    const [before] = (
      await asAnalyst.query(
        'select last_success_at, consecutive_failures from subscriber_freshness where subscriber_id = 80002',
      )
    ).rows;
    await asOwner(
      `update subscribers set last_success_at = now() - interval '2 days', consecutive_failures = 4 where subscriber_id = 80002`,
    );
    try {
      const { rows } = await asAnalyst.query(stale!);
      expect(rows.map((r) => [Number(r.subscriber_id), r.last_status, r.consecutive_failures])).toEqual([
        [80_002, 'succeeded', 4],
      ]);
    } finally {
      await asOwner(
        `update subscribers set last_success_at = '${(before!.last_success_at as Date).toISOString()}',
           consecutive_failures = ${Number(before!.consecutive_failures)} where subscriber_id = 80002`,
      );
    }

    // The last refreshes: the one seeded, with its counts.
    const refreshes = await asAnalyst.query(lastRefreshes!);
    expect(
      refreshes.rows.map((r) => [
        Number(r.id),
        r.trigger,
        r.status,
        r.finished_at instanceof Date,
        r.subscribers_total,
        r.succeeded,
        r.failed,
        r.not_found,
        r.invalid,
      ]),
    ).toEqual([[refreshRunId, 'manual', 'completed', true, 2, 1, 0, 1, 0]]);
  });

  it('the analyst reads no e-mail address: not in subscribers, not in sync_runs, and no audit trail', async () => {
    await asOwner(`update subscribers set email = 'ayse.yilmaz@example.com' where subscriber_id = 80001`);
    await asOwner(`update sync_runs set email = 'ayse.yilmaz@example.com' where subscriber_id = 80001`);
    for (const denied of [
      'select email from subscribers',
      'select * from subscribers',
      'select email from sync_runs',
      'select * from sync_runs',
      'select * from admin_actions',
      'select card_token_fingerprint from saved_cards',
    ]) {
      await expect(asAnalyst.query(denied), denied).rejects.toMatchObject({ code: '42501' });
    }
    // The same rows without the e-mails, to join on subscriber_id.
    const subs = await asAnalyst.query('select * from subscribers_report order by subscriber_id');
    expect(subs.fields.map((f) => f.name)).not.toContain('email');
    expect(subs.rows.map((r) => Number(r.subscriber_id))).toEqual([80_001, 80_002]);
    const runs = await asAnalyst.query('select * from sync_runs_report where subscriber_id = 80001');
    expect(runs.fields.map((f) => f.name)).not.toContain('email');
    expect(runs.rows.map((r) => [Number(r.subscriber_id), r.status])).toEqual([[80_001, 'succeeded']]);
    expect(JSON.stringify([subs.rows, runs.rows])).not.toContain('ayse');
    const named = await asAnalyst.query('select subscriber_id, last_status from subscribers order by 1');
    expect(named.rows.map((r) => [Number(r.subscriber_id), r.last_status])).toEqual([
      [80_001, 'succeeded'],
      [80_002, 'succeeded'],
    ]);
  });

  it('the analyst reads the history: saved_cards_as_of and saved_card_history, without tokens', async () => {
    const now = await asAnalyst.query('select * from saved_cards_as_of(now()) order by id');
    expect(now.rows.map((r) => [Number(r.subscriber_id), r.removed_at === null, r.exact])).toEqual([
      [80_001, true, true],
      [80_001, true, true],
      [80_002, false, true],
    ]);
    expect(now.fields.map((f) => f.name)).not.toContain('card_token');
    const history = await asAnalyst.query('select * from saved_card_history order by card_id, valid_from');
    expect(history.rows.map((r) => [Number(r.subscriber_id), r.is_current])).toEqual([
      [80_001, true],
      [80_001, true],
      [80_002, false],
    ]);
    expect(JSON.stringify([now.rows, history.rows])).not.toContain('deadbeef');
  });

  it('the analyst cannot write', async () => {
    await expect(asAnalyst.query('delete from saved_card_change_log')).rejects.toMatchObject({
      code: '42501',
    });
    await expect(
      asAnalyst.query(
        `insert into saved_card_changes (card_id, subscriber_id, change, changed_at) values (1, 1, 'removed', now())`,
      ),
    ).rejects.toMatchObject({ code: '42501' });
  });
});
