import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import {
  CLAIM_DELIVERIES,
  type ClaimedDelivery,
  claimDeliveries,
  finishAttempt,
} from '../../db/webhooks/delivery.js';
import { parseKeyRing } from '../../src/tokens/index.js';
import { insertEndpoint } from '../../src/webhooks/index.js';
import { CARD_TOKEN_KEYS } from '../support/fixtures.js';
import { useTestDatabase } from '../support/helpers.js';

// the claim of a worker draining a backlog. A receiver back after an outage finds
// thousands of deliveries pending, on statistics taken while none was, with the heads of many
// subscribers' queues waiting for a retry. Each claim must read a handful of pages, not the backlog:
// the plans this replaced read every pending row of the endpoint at every claim (docs/benchmarks.md,
// "npm run bench:changes").
// Pages read, not time, so the test says the same on a loaded machine.

const database = useTestDatabase();
const ring = parseKeyRing(CARD_TOKEN_KEYS);
const pool = () => database.handle.pool;
const subscribers = 600;
const perSubscriber = 5;

/** An endpoint (no loop runs in this file) with `subscribers` × `perSubscriber` pending deliveries. */
async function backlog(): Promise<number> {
  const { id } = await insertEndpoint(pool(), ring, {
    url: 'https://receiver.example/hook',
    description: 'backlog',
    eventTypes: null,
    feedCursor: '0-0',
  });
  // The statistics of a new install: taken while nothing was pending.
  await pool().query('analyze webhook_deliveries');
  await pool().query(
    `insert into webhook_deliveries (endpoint_id, event_id, subscriber_id, type, event_at, body)
     select $1::bigint, 'evt_' || ($1::bigint * 100000 + g), 900000 + g % $2::int, 'card.added', now(), '{}'
     from generate_series(0, $2::int * $3::int - 1) g order by g`,
    [id, subscribers, perSubscriber],
  );
  return id;
}

/** Pages (shared buffers) one claim of `limit` reads, and what it claimed; rolled back. */
async function claimCost(endpointId: number, limit: number): Promise<{ pages: number; claimed: number }> {
  const client: pg.PoolClient = await pool().connect();
  try {
    await client.query('begin');
    const { rows } = await client.query(`explain (analyze, buffers, format json) ${CLAIM_DELIVERIES}`, [
      endpointId,
      limit,
      'explain',
      60_000,
    ]);
    const plan = rows[0]['QUERY PLAN'][0].Plan;
    return {
      pages: Number(plan['Shared Hit Blocks'] ?? 0) + Number(plan['Shared Read Blocks'] ?? 0),
      claimed: Number(plan['Actual Rows'] ?? 0),
    };
  } finally {
    await client.query('rollback');
    client.release();
  }
}

const failed = {
  delivered: false,
  status: 503,
  latencyMs: 1,
  errorCode: null,
  excerpt: 'busy',
  retryAfterMs: null,
} as const;

describe('claiming from a backlog', () => {
  it('reads a few pages for 3,000 pending on statistics taken empty, and each subscriber’s oldest comes first', async () => {
    const endpointId = await backlog();
    const cost = await claimCost(endpointId, 8);
    expect(cost.claimed).toBe(8);
    expect(cost.pages).toBeLessThan(300);
    const claimed = await claimDeliveries(pool(), { endpointId, limit: 8, workerId: 'w', leaseMs: 60_000 });
    const { rows } = await pool().query<{ id: string }>(
      `select min(id) as id from webhook_deliveries where endpoint_id = $1 group by subscriber_id`,
      [endpointId],
    );
    const heads = new Set(rows.map((r) => Number(r.id)));
    expect(claimed).toHaveLength(8);
    for (const d of claimed) expect(heads.has(d.id)).toBe(true);
  });

  it('while the heads of most queues wait for a retry, their later deliveries wait with them, and the other heads are claimed without reading them; a dead letter or a delivery holds none back', async () => {
    const endpointId = await backlog();
    // Every subscriber's head but the last 20 fails once: a retry a minute away.
    const retried: ClaimedDelivery[] = [];
    while (retried.length < subscribers - 20) {
      const batch = await claimDeliveries(pool(), {
        endpointId,
        limit: Math.min(100, subscribers - 20 - retried.length),
        workerId: 'w',
        leaseMs: 60_000,
      });
      for (const d of batch) {
        const { finish } = await finishAttempt(pool(), d, {
          workerId: 'w',
          result: failed,
          waitMs: 60_000,
          giveUpAfterMs: 86_400_000,
          disableAfterMs: 86_400_000 * 5,
        });
        expect(finish).toBe('retry');
      }
      retried.push(...batch);
    }
    // None of a retried subscriber's later deliveries is due before its head.
    const { rows: early } = await pool().query(
      `select count(*)::int as n from webhook_deliveries b join webhook_deliveries h
         on h.endpoint_id = b.endpoint_id and h.subscriber_id = b.subscriber_id and h.id < b.id
       where b.endpoint_id = $1 and h.id = any($2::bigint[]) and b.next_attempt_at < h.next_attempt_at`,
      [endpointId, retried.map((d) => d.id)],
    );
    expect(early[0].n).toBe(0);
    // The 20 untouched heads are claimed reading the 100 due deliveries of their subscribers (about
    // 650 pages), not the 2,360 held back (about 8,000 more). The first scan after the updates
    // passes over their old index entries once and marks them dead.
    await claimCost(endpointId, 32);
    const cost = await claimCost(endpointId, 32);
    expect(cost.claimed).toBe(20);
    expect(cost.pages).toBeLessThan(2000);
    // A dead letter holds nothing back: its subscriber's next delivery is due at once.
    const [head] = retried;
    await pool().query(`update webhook_deliveries set locked_by = 'w' where id = $1`, [head!.id]);
    const dead = await finishAttempt(pool(), head!, {
      workerId: 'w',
      result: failed,
      waitMs: 60_000,
      giveUpAfterMs: 0,
      disableAfterMs: 86_400_000 * 5,
    });
    expect(dead.finish).toBe('dead');
    const next = await claimDeliveries(pool(), { endpointId, limit: 32, workerId: 'w', leaseMs: 60_000 });
    expect(next.map((d) => d.subscriberId)).toContain(head!.subscriberId);
    // Nor does a retried head once delivered: its subscriber's next is due at once.
    const again = retried[1]!;
    await pool().query(`update webhook_deliveries set locked_by = 'w' where id = $1`, [again.id]);
    const delivered = await finishAttempt(
      pool(),
      { ...again, attempt: 2 },
      {
        workerId: 'w',
        result: { ...failed, delivered: true, status: 204, excerpt: '' },
        waitMs: 60_000,
        giveUpAfterMs: 86_400_000,
        disableAfterMs: 86_400_000 * 5,
      },
    );
    expect(delivered.finish).toBe('delivered');
    const after = await claimDeliveries(pool(), { endpointId, limit: 32, workerId: 'w', leaseMs: 60_000 });
    expect(after.map((d) => d.subscriberId)).toContain(again.subscriberId);
  });

  it('claims nothing for a disabled endpoint, whatever the loop last read', async () => {
    const endpointId = await backlog();
    expect((await claimCost(endpointId, 8)).claimed).toBe(8);
    await pool().query('update webhook_endpoints set enabled = false where id = $1', [endpointId]);
    expect(await claimDeliveries(pool(), { endpointId, limit: 8, workerId: 'w', leaseMs: 60_000 })).toEqual(
      [],
    );
  });
});
