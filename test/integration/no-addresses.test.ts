import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { enqueueSyncs, startSyncWorker } from '../../jobs/sync/index.js';
import { createApiClient } from '../../src/api/index.js';
import { API_KEY, makeCard, ok, testTokens, useScriptedApi } from '../support/fixtures.js';
import { captureLogger, useCleanups, useTestDatabase } from '../support/helpers.js';
import { testQueue, waitFor } from '../support/queue-helpers.js';

// No e-mail address where the reporting role or the logs can read it: syncs by e-mail through
// the queue and a real worker (a success, a 404, a 5xx whose body quotes addresses), then every
// column the reporting role may read, and every log line of the run.

const database = useTestDatabase();
const upstream = useScriptedApi();
const cleanups = useCleanups();
const { logger, lines } = captureLogger('debug');
const q = testQueue({ attempts: 1 });
const analyst = `analyst_${randomBytes(4).toString('hex')}`;
let asAnalyst: pg.Client;

/** Something@something.something, as a harvester would look for it. */
const ADDRESS = /[^\s"'<>@]+@[^\s"'<>@]+\.[a-z]{2,}/i;

const ADDRESSES = {
  found: 'Jane.Doe+cards@example.com',
  unknown: 'nobody.here@example.org',
  failing: 'o.hara@mail.example.co.uk',
  colon: 'a:b@example.com',
};

beforeAll(async () => {
  upstream.script.set(`email:${ADDRESSES.found}`, ok([makeCard(81001), makeCard(81001)]));
  upstream.script.set(`email:${ADDRESSES.unknown}`, {
    status: 404,
    body: { title: `no ${ADDRESSES.unknown}` },
  });
  upstream.script.set(`email:${ADDRESSES.failing}`, {
    status: 400,
    body: {
      title: 'Bad Request',
      detail: `no wallet for ${ADDRESSES.failing}; contact support@provider.example.net`,
    },
  });
  upstream.script.set(`email:${ADDRESSES.colon}`, ok([makeCard(81002)]));
});
afterAll(async () => {
  await asAnalyst?.end();
  await database.handle.pool.query(`drop role if exists ${analyst}`);
});

describe('syncs by e-mail through the queue', () => {
  it('leave no address in any column the reporting role can read, nor in any log line', async () => {
    const api = createApiClient({
      baseUrl: upstream.url,
      apiKey: API_KEY,
      pathStyle: 'standard',
      timeoutMs: 2000,
    });
    cleanups.push(() => api.close());
    const worker = await startSyncWorker(
      { db: database.handle.db, api, logger, tokens: testTokens, queue: q.queue, redis: q.redis },
      { redisUrl: inject('redisUrl'), prefix: q.prefix, concurrency: 2 },
    );
    cleanups.push(() => worker.close(5000));
    const targets = Object.values(ADDRESSES).map((email) => ({ email }));
    const counts = await enqueueSyncs(q.queue, targets, 'api');
    // `a:b@example.com` included: BullMQ takes every job, none is refused.
    expect(counts).toMatchObject({ enqueued: 4, refused: [] });
    for (const id of counts.jobIds) expect(id).not.toMatch(/@/);
    // The malformed one (a ':' in its local part, queued past the enqueue's check as an old
    // release's job could be) fails at the worker's payload check: no request, no run.
    await waitFor('three runs', async () => {
      const r = await database.handle.pool.query('select count(*)::int as n from sync_runs');
      return r.rows[0].n >= 3;
    });
    await waitFor('the jobs to finish', async () => {
      const c = await q.queue.getJobCounts('active', 'waiting');
      return (c.active ?? 0) + (c.waiting ?? 0) === 0;
    });

    // The owner sees what happened, addresses masked in the upstream's words.
    const runs = await database.handle.pool.query(
      'select status, job_id, error_message from sync_runs order by id',
    );
    expect(runs.rows.map((r) => r.status).sort()).toEqual(['failed', 'not_found', 'succeeded']);
    const refused = (await q.queue.getFailed()).filter((j) => !runs.rows.some((r) => r.job_id === j.id));
    expect(refused).toHaveLength(1);
    expect(refused[0]!.failedReason).not.toMatch(ADDRESS);
    expect(runs.rows.find((r) => r.status === 'failed')!.error_message).toContain('[e-mail]');

    // As the reporting role: every column of every table and view it may read.
    await database.handle.pool.query(
      readFileSync(new URL('../../db/reporting-role.sql', import.meta.url), 'utf8'),
    );
    await database.handle.pool.query(`create role ${analyst} login in role cards_sync_reporting`);
    const url = new URL(database.url);
    url.username = analyst;
    asAnalyst = new pg.Client({ connectionString: url.toString() });
    await asAnalyst.connect();
    const readable = await asAnalyst.query<{ table_name: string; column_name: string }>(`
      select c.table_name, c.column_name from information_schema.columns c
      where c.table_schema = 'public'
        and has_column_privilege(format('%I.%I', c.table_schema, c.table_name), c.column_name, 'select')
      order by 1, 2`);
    const tables = new Set(readable.rows.map((r) => r.table_name));
    expect([...tables]).toEqual(
      expect.arrayContaining(['sync_runs', 'subscribers', 'sync_runs_report', 'saved_card_changes']),
    );
    let values = 0;
    for (const { table_name: table, column_name: column } of readable.rows) {
      const r = await asAnalyst.query(
        `select ${pg.escapeIdentifier(column)}::text as v from ${pg.escapeIdentifier(table)}`,
      );
      for (const row of r.rows) {
        values++;
        expect(row.v ?? '', `${table}.${column}`).not.toMatch(ADDRESS);
      }
    }
    expect(values).toBeGreaterThan(100);
    // …and the columns that hold addresses are not among them.
    await expect(asAnalyst.query('select email from subscribers')).rejects.toThrow(/permission denied/);

    // Every log line of the run: no address, only the masked form the logger binds.
    expect(lines.length).toBeGreaterThan(4);
    for (const line of lines) {
      for (const address of Object.values(ADDRESSES)) expect(line).not.toContain(address);
      expect(line.replace(/"email":"[^"]\*\*\*@[^"]+"/g, ''), line).not.toMatch(ADDRESS);
    }
  });
});
