import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, createApiClient } from '../../src/api/index.js';
import { syncSubscriber } from '../../src/sync/index.js';
import { API_KEY, makeCard, ok, testTokens, useScriptedApi } from '../support/fixtures.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';

// The analytics guide's "Questions about the past", run as the reporting role on a database seeded by real
// syncs: a wallet that changed, cards added and removed, a subscriber the API stopped knowing.

const database = useTestDatabase();
const upstream = useScriptedApi();
const { logger } = captureLogger('info');
const analyst = `analyst_${randomBytes(4).toString('hex')}`;
const WALLET = 72_001;
const GONE = 72_002;
let api: ApiClient;
let asAnalyst: pg.Client;
let before: Date;
const a = makeCard(WALLET, { cardBankName: 'AKBA' });
const b = makeCard(WALLET);
const c = makeCard(WALLET);
const gone = [makeCard(GONE), makeCard(GONE)];

const sync = (subscriberId: number) =>
  syncSubscriber(
    { db: database.handle.db, api, logger, tokens: testTokens },
    { target: { subscriberId }, trigger: 'manual' },
  );

async function asOwner(sql: string): Promise<void> {
  await database.handle.pool.query(sql);
}

/** The statements of the analytics guide's block under "Questions about the past". */
function readmeQueries(): string[] {
  const readme = readFileSync(new URL('../../docs/analytics.md', import.meta.url), 'utf8');
  const section = readme.slice(readme.indexOf('### Questions about the past'));
  const block = /```sql\n([\s\S]*?)```/.exec(section)?.[1] ?? '';
  return block
    .split(';')
    .map((q) => q.replace(/--.*$/gm, '').trim())
    .filter(Boolean);
}

beforeAll(async () => {
  api = createApiClient({ baseUrl: upstream.url, apiKey: API_KEY, pathStyle: 'standard', timeoutMs: 2000 });
  upstream.script.set(`id:${WALLET}`, ok([a, b]));
  upstream.script.set(`id:${GONE}`, ok(gone));
  await sync(WALLET);
  await sync(GONE);
  await new Promise((r) => setTimeout(r, 5));
  before = new Date();
  await new Promise((r) => setTimeout(r, 5));
  upstream.script.set(`id:${WALLET}`, ok([{ ...a, cardBankName: 'ISBANK' }, c]));
  await sync(WALLET);
  upstream.script.set(`id:${GONE}`, { status: 404, body: { error: 'unknown subscriber' } });
  for (let i = 0; i < 3; i++) await sync(GONE);
  await asOwner(readFileSync(new URL('../../db/reporting-role.sql', import.meta.url), 'utf8'));
  await asOwner(`create role ${analyst} login in role cards_sync_reporting`);
  const url = new URL(database.url);
  url.username = analyst;
  asAnalyst = new pg.Client({ connectionString: url.toString() });
  await asAnalyst.connect();
});
afterAll(async () => {
  await api.close();
  await asAnalyst?.end();
  await asOwner(`drop role if exists ${analyst}`);
});

describe("the analytics guide's questions about the past, as the reporting role", () => {
  const queries = readmeQueries();
  const run = (i: number, replace: (q: string) => string = (q) => q) => asAnalyst.query(replace(queries[i]!));

  it('there are the four documented queries', () => {
    expect(queries).toHaveLength(4);
  });

  it('the wallet as of a date: the cards then, with the values then', async () => {
    const { rows } = await run(0, (q) =>
      q.replace("'2026-03-01T00:00:00Z'", `'${before.toISOString()}'`).replace(', 42)', `, ${WALLET})`),
    );
    expect(rows.map((r) => [Number(r.id), r.card_bank_name])).toEqual([
      [a.id, 'AKBA'],
      [b.id, b.cardBankName],
    ]);
  });

  it('cards added and removed per week', async () => {
    const { rows } = await run(1);
    const total = (k: string) => rows.reduce((n, r) => n + Number(r[k]), 0);
    expect(total('added')).toBe(5);
    // b dropped from the wallet, and the two cards of the subscriber the API no longer knows.
    expect(total('removed')).toBe(3);
  });

  it('subscribers gone upstream, with the cards that went with them', async () => {
    const { rows } = await run(2);
    expect(
      rows.map((r) => [Number(r.subscriber_id), r.consecutive_not_found, Number(r.cards_removed)]),
    ).toEqual([[GONE, 3, 2]]);
  });

  it("from a card's create_date to its first sync", async () => {
    const { rows } = await run(3);
    // Every seeded card is of one bank code, created on the fixtures' date and first synced today.
    expect(rows.map((r) => [Number(r.card_bank_code), Number(r.cards)])).toEqual([[a.cardBankCode, 5]]);
    const days = (Date.now() - Date.parse(a.createDate)) / 86_400_000;
    expect(rows[0].median_wait.days).toBeGreaterThanOrEqual(Math.floor(days) - 1);
    expect(rows[0].median_wait.days).toBeLessThanOrEqual(Math.ceil(days));
  });
});
