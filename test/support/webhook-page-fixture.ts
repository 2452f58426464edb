import { setTimeout } from 'node:timers/promises';
import type pg from 'pg';
import { parseKeyRing } from '../../src/tokens/index.js';
import { feedHead, insertEndpoint, takeEvents } from '../../src/webhooks/index.js';
import { CARD_TOKEN_KEYS } from './fixtures.js';
import { emit } from './webhook-events.js';

// An endpoint for the ops page's webhooks view: three events taken, the first two dead-lettered
// after a 500 whose answer is markup, the third still pending. Its URL's query string, description
// and excerpt are hostile so a page that shows them unescaped (or shows the query) fails.

const ring = parseKeyRing(CARD_TOKEN_KEYS);

/** In the URL's query string: the page must drop it. */
export const QUERY_TOKEN = 'receiver-query-token-7f31';
export const DESCRIPTION = 'CRM <b>hook</b> "fraud" & co';
export const EXCERPT = '<script>alert(1)</script> upstream broke';

export interface SeededEndpoint {
  id: number;
  secret: string;
  /** The three events' ids, in feed order. */
  events: string[];
  /** The first two: dead letters. */
  dead: string[];
}

export async function seedWebhookEndpoint(pool: pg.Pool, subscriberId: number): Promise<SeededEndpoint> {
  const { id, secret } = await insertEndpoint(pool, ring, {
    url: `http://127.0.0.1:9/hook?token=${QUERY_TOKEN}`,
    description: DESCRIPTION,
    eventTypes: null,
    feedCursor: await feedHead(pool),
  });
  const events = await emit(pool, subscriberId, 3);
  // The feed stops at its horizon while an older transaction that wrote events is still open (another
  // test's, on this database): take again, as the fan-out loop does, until all three are delivered.
  // Taken once, a CI run found one delivery of three.
  for (const until = Date.now() + 5000; ; ) {
    await takeEvents(pool, id);
    const { rows } = await pool.query<{ n: number }>(
      'select count(*)::int as n from webhook_deliveries where endpoint_id = $1',
      [id],
    );
    if (rows[0]!.n >= events.length || Date.now() > until) break;
    await setTimeout(20);
  }
  const dead = events.slice(0, 2);
  const { rows } = await pool.query<{ id: string }>(
    `update webhook_deliveries set status = 'dead', attempts = 2, first_attempt_at = now(), finished_at = now()
     where endpoint_id = $1 and event_id = any($2) returning id`,
    [id, dead],
  );
  for (const row of rows) {
    await pool.query(
      `insert into webhook_attempts (delivery_id, endpoint_id, attempt, outcome, status_code, error_code, latency_ms, excerpt)
       values ($1, $2, 2, 'failed', 500, 'http_status', 42, $3)`,
      [row.id, id, EXCERPT],
    );
  }
  await pool.query('update webhook_endpoints set failing_since = now() where id = $1', [id]);
  return { id, secret, events, dead };
}

/** The endpoint's deliveries in id order. */
export async function deliveriesOf(
  pool: pg.Pool,
  endpointId: number,
): Promise<{ eventId: string; status: string; replay: boolean }[]> {
  const { rows } = await pool.query(
    'select event_id, status, replay from webhook_deliveries where endpoint_id = $1 order by id',
    [endpointId],
  );
  return rows.map((r) => ({ eventId: r.event_id, status: r.status, replay: r.replay }));
}
