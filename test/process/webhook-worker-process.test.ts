import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { enqueueSyncs } from '../../jobs/sync/index.js';
import { parseKeyRing } from '../../src/tokens/index.js';
import { feedHead, insertEndpoint } from '../../src/webhooks/index.js';
import { API_KEY, CARD_TOKEN_KEYS, useScriptedApi } from '../support/fixtures.js';
import { useCleanups, useTestDatabase } from '../support/helpers.js';
import { type CliProcess, startCli, testQueue, waitFor } from '../support/queue-helpers.js';
import { startReceiver } from '../support/webhook-receiver.js';

// Webhook delivery in real worker processes: events written by real syncs reach a receiver, each
// verified by standardwebhooks, shared between two workers, and a SIGTERM stops them cleanly.

const database = useTestDatabase();
const upstream = useScriptedApi();
const cleanups = useCleanups();
let receiver: Awaited<ReturnType<typeof startReceiver>>;

beforeAll(async () => {
  // Every fifth delivery is refused once: retries run in the processes too.
  const refused = new Set<string>();
  receiver = await startReceiver((r, res, n) => {
    const id = String(r.headers['webhook-id']);
    if (n % 5 === 0 && !refused.has(id)) {
      refused.add(id);
      return res.writeHead(500).end();
    }
    res.end();
  });
});
afterAll(async () => {
  await receiver.close();
});

describe('webhook delivery in worker processes', () => {
  it('two workers deliver every event of real syncs, each verified, in order per subscriber; SIGTERM stops them', async () => {
    const ring = parseKeyRing(CARD_TOKEN_KEYS);
    const pool = database.handle.pool;
    const { id, secret } = await insertEndpoint(pool, ring, {
      url: `${receiver.url}/cards`,
      description: 'worker test',
      eventTypes: null,
      feedCursor: await feedHead(pool),
    });
    const q = testQueue({ attempts: 3 });
    cleanups.push(q.cleanup);
    const env = {
      DATABASE_URL: database.url,
      REDIS_URL: inject('redisUrl'),
      QUEUE_PREFIX: q.prefix,
      CARDS_API_BASE_URL: upstream.url,
      CARDS_API_KEY: API_KEY,
      CARD_TOKEN_KEYS,
      WEBHOOK_ALLOW_PRIVATE: 'true',
      CHANGE_EVENTS: 'on',
      WEBHOOK_TIMEOUT_MS: '2000',
      LOG_LEVEL: 'info',
    };
    const workers: CliProcess[] = [
      startCli(['worker', '--concurrency', '4'], env),
      startCli(['worker', '--concurrency', '4'], env),
    ];
    for (const w of workers) {
      cleanups.push(async () => {
        if (w.process.exitCode === null) w.process.kill('SIGKILL');
        await w.done;
      });
    }
    const ids = Array.from({ length: 40 }, (_, i) => 70_000 + i);
    await enqueueSyncs(
      q.queue,
      ids.map((subscriberId) => ({ subscriberId })),
      'manual',
    );
    const expected = await waitFor(
      'the syncs and their events',
      async () => {
        const { rows } = await pool.query(
          "select count(*)::int as n from sync_runs where subscriber_id between 70000 and 70039 and status = 'succeeded'",
        );
        if (rows[0].n < ids.length) return false;
        const events = await pool.query(
          'select count(*)::int as n from change_events where subscriber_id between 70000 and 70039',
        );
        return events.rows[0].n as number;
      },
      60_000,
    );
    expect(expected).toBeGreaterThan(40);
    await waitFor(
      'every event delivered',
      async () => {
        const { rows } = await pool.query(
          "select count(*)::int as n from webhook_deliveries where endpoint_id = $1 and status = 'delivered'",
          [id],
        );
        return rows[0].n === expected;
      },
      60_000,
    );
    const wh = new Webhook(secret);
    const bySubscriber = new Map<number, string[]>();
    for (const r of receiver.received) {
      const event = wh.verify(r.body, r.headers as Record<string, string>) as {
        id: string;
        data: { subscriberId: number };
      };
      expect(event.id).toBe(r.headers['webhook-id']);
      const seen = bySubscriber.get(event.data.subscriberId) ?? [];
      if (seen.at(-1) !== event.id) seen.push(event.id);
      bySubscriber.set(event.data.subscriberId, seen);
    }
    // Per subscriber, what arrived (a retried event once) is the feed's order.
    const { rows: order } = await pool.query(
      'select event_id, subscriber_id from webhook_deliveries where endpoint_id = $1 order by id',
      [id],
    );
    for (const s of ids) {
      expect(bySubscriber.get(s) ?? []).toEqual(
        order.filter((o) => Number(o.subscriber_id) === s).map((o) => o.event_id),
      );
    }
    const attempts = await pool.query(
      'select count(*)::int as n from webhook_attempts where endpoint_id = $1',
      [id],
    );
    expect(attempts.rows[0].n).toBe(receiver.received.length);

    for (const w of workers) w.process.kill('SIGTERM');
    const runs = await Promise.all(workers.map((w) => w.done));
    expect(runs.map((r) => r.code)).toEqual([0, 0]);
    expect(runs.map((r) => r.stdout + r.stderr).join('\n')).not.toContain(secret);
  }, 120_000);
});
