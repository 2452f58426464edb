import { describe, expect, it } from 'vitest';
import { startDeliveryLoop } from '../../jobs/webhooks/delivery-loop.js';
import { parseKeyRing } from '../../src/tokens/index.js';
import { createWebhookSender, insertEndpoint } from '../../src/webhooks/index.js';
import { CARD_TOKEN_KEYS } from '../support/fixtures.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';
import { waitFor } from '../support/queue-helpers.js';

// the retention of webhook deliveries keeps up with what a busy endpoint makes. It
// dropped one batch an hour, which three deliveries a second outrun; a loop now drops batches
// until none is full (for up to a second, then again 10 s later).

const database = useTestDatabase();
const ring = parseKeyRing(CARD_TOKEN_KEYS);
const pool = () => database.handle.pool;

describe('webhook delivery retention', () => {
  it('drops every finished delivery past the retention in one go, batch after batch; keeps the recent and the pending', async () => {
    const { id } = await insertEndpoint(pool(), ring, {
      url: 'https://receiver.example/hook',
      description: 'retention',
      eventTypes: null,
      feedCursor: '0-0',
    });
    await pool().query('update webhook_endpoints set enabled = false where id = $1', [id]);
    // 35 delivered 40 days ago, 1 dead 40 days ago, 1 delivered yesterday, 1 pending from 40 days ago.
    await pool().query(
      `insert into webhook_deliveries (endpoint_id, event_id, subscriber_id, type, event_at, body, status, finished_at, created_at)
       select $1::bigint, 'evt_old_' || g, 7, 'card.added', now() - interval '40 days', '{}',
              case when g = 0 then 'dead' else 'delivered' end, now() - interval '40 days', now() - interval '40 days'
       from generate_series(0, 35) g`,
      [id],
    );
    await pool().query(
      `insert into webhook_deliveries (endpoint_id, event_id, subscriber_id, type, event_at, body, status, finished_at)
       values ($1, 'evt_recent', 7, 'card.added', now() - interval '1 day', '{}', 'delivered', now() - interval '1 day'),
              ($1, 'evt_pending', 8, 'card.added', now() - interval '40 days', '{}', 'pending', null)`,
      [id],
    );
    const { logger, lines } = captureLogger();
    const sender = createWebhookSender({ timeoutMs: 1000, allowPrivate: true });
    const loop = startDeliveryLoop({
      pool: pool(),
      ring,
      sender,
      logger,
      workerId: 'retention-test',
      leaseMs: 10_000,
      pollMs: 50,
      retentionDays: 30,
      pruneBatch: 10,
    });
    try {
      await waitFor('the old deliveries dropped', async () => {
        const { rows } = await pool().query<{ n: number }>(
          `select count(*)::int as n from webhook_deliveries where endpoint_id = $1 and event_id like 'evt_old_%'`,
          [id],
        );
        return rows[0]!.n === 0;
      });
    } finally {
      await loop.stop(1000);
      await sender.close();
    }
    const { rows } = await pool().query<{ event_id: string }>(
      'select event_id from webhook_deliveries where endpoint_id = $1 order by event_id',
      [id],
    );
    expect(rows.map((r) => r.event_id)).toEqual(['evt_pending', 'evt_recent']);
    // One pass: four batches of at most 10, one log line for all 36.
    const dropped = lines
      .map((l) => JSON.parse(l) as { msg: string; dropped?: number })
      .filter((l) => l.msg === 'old webhook deliveries dropped');
    expect(dropped.map((l) => l.dropped)).toEqual([36]);
  });
});
