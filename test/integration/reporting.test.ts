import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { declareKnownMigration } from '../../db/fence.js';
import { createApiClient } from '../../src/api/client.js';
import { syncSubscriber } from '../../src/sync/sync-subscriber.js';
import { API_KEY, makeCard, ok, testTokens, useScriptedApi } from '../support/fixtures.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';

// The analysts' surface: views without tokens, and a role that cannot read the token column.

const database = useTestDatabase();
const upstream = useScriptedApi();
const analyst = `analyst_${randomBytes(4).toString('hex')}`;
let asAnalyst: pg.Client;

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
  upstream.script.set(
    'id:80001',
    ok([makeCard(80_001, { cardToken: 'deadbeef'.repeat(4) }), makeCard(80_001)]),
  );
  upstream.script.set('id:80002', ok([makeCard(80_002)]));
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
    expect(rows.length).toBe(3);
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
    expect(rows.map((r) => [Number(r.subscriber_id), r.last_status, r.active_cards])).toEqual([
      [80_001, 'succeeded', 2],
      [80_002, 'succeeded', 0],
    ]);
    expect(rows[0].age).toBeDefined();
  });

  it("the analytics guide's example queries run as the analyst", async () => {
    const readme = readFileSync(new URL('../../docs/analytics.md', import.meta.url), 'utf8');
    const block = /```sql\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(block).toBeDefined();
    const queries = block!
      .split(';')
      .map((q) => q.replace(/--.*$/gm, '').trim())
      .filter(Boolean);
    expect(queries.length).toBeGreaterThanOrEqual(3);
    for (const q of queries) await asAnalyst.query(q);
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
    expect(runs.rows.length).toBeGreaterThan(0);
    expect(JSON.stringify([subs.rows, runs.rows])).not.toContain('ayse');
    const named = await asAnalyst.query('select subscriber_id, last_status from subscribers order by 1');
    expect(named.rows.length).toBe(2);
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
