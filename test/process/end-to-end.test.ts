import { sql } from 'drizzle-orm';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { cardsFor } from '../../src/mock-api/data.js';
import { API_KEY, CARD_TOKEN_KEYS, makeCard, ok, useScriptedApi } from '../support/fixtures.js';
import { useTestDatabase } from '../support/helpers.js';
import { runCli, testQueue } from '../support/queue-helpers.js';

// The "done when": enqueue ids and e-mails with the CLI, run `worker --exit-when-idle`,
// and find exactly the rows the API describes, through every outcome of docs/architecture.md.

const database = useTestDatabase();
const upstream = useScriptedApi();
const q = testQueue();
afterAll(() => q.cleanup());

const rows = async <T extends Record<string, unknown>>(query: ReturnType<typeof sql>) =>
  (await database.handle.db.execute<T>(query)).rows;

describe('enqueue, then worker --exit-when-idle', () => {
  it('leaves exactly the rows the API describes', async () => {
    const env = {
      DATABASE_URL: database.url,
      REDIS_URL: inject('redisUrl'),
      QUEUE_PREFIX: q.prefix,
      CARDS_API_BASE_URL: upstream.url,
      CARDS_API_KEY: API_KEY,
      CARD_TOKEN_KEYS,
      CARDS_API_TIMEOUT_MS: '1000',
      SYNC_ATTEMPTS: '3',
      LOG_LEVEL: 'warn',
    };
    // A subscriber that already had cards, one of which vanished upstream.
    const vanished = makeCard(60_005);
    const kept = makeCard(60_005);
    upstream.script.set('id:60005', ok([vanished, kept]));
    expect((await runCli(['sync', '--id', '60005'], env)).code).toBe(0);

    upstream.script.set('id:60005', ok([kept]));
    upstream.script.set('id:60006', ok([]));
    upstream.script.set('id:60007', { status: 404 });
    upstream.script.set('id:60008', ok([{ ...makeCard(60_008), binNumber: '4761123412340043' }]));
    upstream.script.set('id:60009', (n) => (n === 1 ? { status: 503 } : ok([makeCard(60_009)])));
    upstream.script.set('id:60010', (n) =>
      n === 1 ? { status: 429, headers: { 'retry-after': '1' } } : ok([makeCard(60_010)]),
    );
    upstream.script.set('id:60011', { status: 500 });
    upstream.script.set('id:60012', { status: 422 });

    const enqueue = await runCli(
      ['enqueue', '--id', '60001', '--email', 'subscriber-60002@example.com', '--file', '-'],
      env,
      '60005\n60006\n60007\n60008\n60009\n60010\n60011\n60012\n',
    );
    expect(enqueue.code).toBe(0);
    expect(enqueue.stdout).toContain('enqueued 10, already queued 0, rejected 0');

    const worker = await runCli(['worker', '--exit-when-idle', '--concurrency', '4'], env);
    expect(worker.code).toBe(0);

    const last = await rows<{ subscriber_id: number; status: string; error_code: string | null }>(sql`
      select distinct on (subscriber_id) subscriber_id::int, status, error_code from sync_runs
      where subscriber_id between 60001 and 60012 order by subscriber_id, id desc`);
    expect(Object.fromEntries(last.map((r) => [r.subscriber_id, r.status]))).toEqual({
      60001: 'succeeded',
      60002: 'succeeded',
      60005: 'succeeded',
      60006: 'succeeded',
      60007: 'not_found',
      60008: 'invalid_response',
      60009: 'succeeded',
      60010: 'succeeded',
      60011: 'failed',
      60012: 'failed',
    });

    const active = await rows<{ subscriber_id: number; n: number }>(sql`
      select subscriber_id::int, count(*)::int as n from saved_cards
      where subscriber_id between 60001 and 60012 and removed_at is null group by 1 order by 1`);
    expect(Object.fromEntries(active.map((r) => [r.subscriber_id, r.n]))).toEqual({
      60001: cardsFor(60_001).length,
      60002: cardsFor(60_002).length,
      60005: 1,
      60009: 1,
      60010: 1,
    });
    const [removed] = await rows<{ removed_at: Date | null }>(
      sql`select removed_at from saved_cards where id = ${vanished.id}`,
    );
    expect(removed!.removed_at).not.toBeNull();
    // 60011 used every attempt; the 429 used none.
    const attempts = await rows<{ subscriber_id: number; n: number }>(sql`
      select subscriber_id::int, count(*)::int as n from sync_runs where subscriber_id in (60010, 60011) group by 1 order by 1`);
    expect(attempts).toEqual([
      { subscriber_id: 60010, n: 2 },
      { subscriber_id: 60011, n: 3 },
    ]);
    expect((await q.queue.getJobCounts('failed')).failed).toBe(4);
  }, 60_000);

  it('stops with exit 1 and says why when the key is rejected, leaving the jobs waiting', async () => {
    const env = {
      DATABASE_URL: database.url,
      REDIS_URL: inject('redisUrl'),
      QUEUE_PREFIX: q.prefix,
      CARDS_API_BASE_URL: upstream.url,
      CARDS_API_KEY: 'not-the-right-key',
      CARD_TOKEN_KEYS,
      LOG_LEVEL: 'error',
    };
    expect((await runCli(['enqueue', '--id', '60020', '--id', '60021'], env)).code).toBe(0);
    const worker = await runCli(['worker', '--exit-when-idle'], env);
    expect(worker.code).toBe(1);
    expect(worker.stderr).toContain('the queue is paused (auth_rejected');
    expect(worker.stderr).toContain('cards-sync resume');
    expect(worker.stderr).not.toContain('not-the-right-key');
    expect((await q.queue.getJobCounts('waiting')).waiting).toBe(2);
    const status = await runCli(['status'], env);
    expect(status.stdout).toContain('PAUSED');
    expect(status.stdout).toContain('auth_rejected');
  }, 30_000);
});
