import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, type DbHandle } from '../../db/client.js';
import { withDatabase } from '../../db/databases.js';
import { runMigrations } from '../../db/migrate.js';
import { type ApiClient, createApiClient } from '../../src/api/index.js';
import { findPostgresBin, type LocalStarted, startLocalPostgres } from '../../src/demo/local-servers.js';
import { syncSubscriber } from '../../src/sync/index.js';
import { API_KEY, makeCard, ok, testTokens, useScriptedApi } from '../support/fixtures.js';
import { captureLogger } from '../support/helpers.js';

// Debezium's outbox event router reads the INSERTs of the outbox table from logical decoding,
// with its default columns: id, aggregatetype, aggregateid, type, payload (docs/events.md). A
// throwaway server with wal_level=logical shows the rows a sync writes reach a replication slot
// as the router expects them. test_decoding prints what pgoutput would send, as text.

const upstream = useScriptedApi();
const { logger } = captureLogger();
let server: LocalStarted;
let handle: DbHandle;
let api: ApiClient;

beforeAll(async () => {
  const bin = findPostgresBin();
  if (bin === undefined) throw new Error('PostgreSQL binaries (initdb, pg_ctl) are needed: see MACHINE.md');
  server = await startLocalPostgres(bin, ['wal_level = logical', 'max_replication_slots = 4']);
  const url = withDatabase(server.url, 'cards_sync_debezium');
  await runMigrations(url);
  handle = createDb(url, { max: 4 });
  api = createApiClient({ baseUrl: upstream.url, apiKey: API_KEY, pathStyle: 'standard', timeoutMs: 2000 });
}, 120_000);
afterAll(async () => {
  await api?.close();
  await handle?.close();
  await server?.stop();
});

describe('Debezium', () => {
  it("a sync's events reach a logical replication slot as INSERTs with the outbox router's default columns", async () => {
    const pool = handle.db.$client;
    await pool.query(`select pg_create_logical_replication_slot('cards_sync_outbox', 'test_decoding')`);
    const card = makeCard(5901);
    upstream.script.set('id:5901', ok([card]));
    await syncSubscriber(
      { db: handle.db, api, logger, tokens: testTokens, changeEvents: true },
      { target: { subscriberId: 5901 }, trigger: 'manual' },
    );
    upstream.script.set('id:5901', ok([{ ...card, cardBankName: 'AKBANK' }]));
    await syncSubscriber(
      { db: handle.db, api, logger, tokens: testTokens, changeEvents: true },
      { target: { subscriberId: 5901 }, trigger: 'manual' },
    );

    const { rows } = await pool.query<{ data: string }>(
      `select data from pg_logical_slot_get_changes('cards_sync_outbox', null, null)`,
    );
    // Each event once, an INSERT, into the day's partition of change_events (test_decoding names
    // the partition; pgoutput with publish_via_partition_root names the table, below).
    const lines = rows.map((r) => r.data).filter((d) => /^table public\.change_events_p\d{8}: /.test(d));
    expect(lines).toHaveLength(2);
    for (const line of lines) expect(line).toMatch(/^table public\.change_events_p\d{8}: INSERT: /);
    expect(rows.some((r) => /change_events.*: (UPDATE|DELETE)/.test(r.data))).toBe(false);
    const [added, changed] = lines;
    for (const [line, type] of [
      [added!, 'card.added'],
      [changed!, 'card.changed'],
    ] as const) {
      expect(line).toMatch(/ id\[uuid\]:'[0-9a-f-]{36}'/);
      expect(line).toContain(" aggregatetype[text]:'subscriber'");
      expect(line).toContain(" aggregateid[text]:'5901'");
      expect(line).toContain(` type[text]:'${type}'`);
      expect(line).toMatch(/ payload\[jsonb\]:'\{.*"subscriberId": 5901.*\}'/);
      expect(line).not.toContain(card.cardToken);
      // Tracing is off in this process: no trace context, so Debezium's tracing skips the event.
      expect(line).toContain(' tracingspancontext[text]:null');
    }
    expect(changed).toContain('"changes": {"cardBankName": {"new": "AKBANK", "old": "AKBA"}}');
    await pool.query(`select pg_drop_replication_slot('cards_sync_outbox')`);
  });

  it('pgoutput with the publication docs/events.md gives sends the rows as change_events, the table Debezium captures', async () => {
    const pool = handle.db.$client;
    await pool.query(
      'create publication cards_sync_outbox for table change_events with (publish_via_partition_root = true)',
    );
    await pool.query(`select pg_create_logical_replication_slot('cards_sync_pgoutput', 'pgoutput')`);
    upstream.script.set('id:5902', ok([makeCard(5902), makeCard(5902)]));
    await syncSubscriber(
      { db: handle.db, api, logger, tokens: testTokens, changeEvents: true },
      { target: { subscriberId: 5902 }, trigger: 'manual' },
    );
    const { rows } = await pool.query<{ data: Buffer }>(
      `select data from pg_logical_slot_get_binary_changes('cards_sync_pgoutput', null, null,
         'proto_version', '1', 'publication_names', 'cards_sync_outbox')`,
    );
    const kinds = rows.map((r) => String.fromCharCode(r.data[0]!));
    // Begin, the relation, one insert per event, commit: nothing of the other tables the sync wrote.
    expect(kinds.filter((k) => k === 'I')).toHaveLength(2);
    const relation = rows.find((r) => r.data[0] === 'R'.charCodeAt(0))!.data.toString('latin1');
    expect(relation).toContain('public\0change_events\0');
    for (const column of ['id', 'aggregatetype', 'aggregateid', 'type', 'payload', 'tracingspancontext']) {
      expect(relation).toContain(`\0${column}\0`);
    }
    await pool.query(`select pg_drop_replication_slot('cards_sync_pgoutput')`);
  });
});
