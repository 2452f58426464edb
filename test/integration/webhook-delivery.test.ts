import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createChangeSignal } from '../../db/events/index.js';
import { type ClaimedDelivery, finishAttempt, pruneDeliveries } from '../../db/webhooks/index.js';
import { type DeliveryLoop, startDeliveryLoop } from '../../jobs/webhooks/delivery-loop.js';
import { parseKeyRing } from '../../src/tokens/index.js';
import type { RetrySchedule } from '../../src/webhooks/index.js';
import {
  createWebhookSender,
  feedHead,
  insertEndpoint,
  replayEndpoint,
  rotateEndpointSecret,
} from '../../src/webhooks/index.js';
import { databaseGauges } from '../support/admin-helpers.js';
import { CARD_TOKEN_KEYS } from '../support/fixtures.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';
import { waitFor } from '../support/queue-helpers.js';
import { emit } from '../support/webhook-events.js';
import { type Received, startReceiver } from '../support/webhook-receiver.js';

// the delivery loop against real receivers on loopback and a real Postgres.

const database = useTestDatabase();
const ring = parseKeyRing(CARD_TOKEN_KEYS);
const { logger } = captureLogger();
const pool = () => database.handle.pool;
/** A short schedule (internal option): a day of retries becomes 1.5 s, decided by Postgres's clock. */
const schedule: RetrySchedule = {
  baseMs: 40,
  maxDelayMs: 200,
  maxRetryAfterMs: 5000,
  minDelayMs: 20,
  giveUpAfterMs: 1500,
  disableAfterMs: 86_400_000,
};
const sender = createWebhookSender({ timeoutMs: 1500, allowPrivate: true });
let loop: DeliveryLoop;
let subscriber = 100;

beforeAll(() => {
  loop = startDeliveryLoop({
    pool: pool(),
    ring,
    sender,
    logger,
    workerId: 'test-worker',
    leaseMs: 10_000,
    pollMs: 50,
    perEndpoint: 3,
    schedule,
  });
});
// A closed receiver's port may be handed to the next test's: endpoints live one test each.
afterEach(async () => {
  await pool().query('update webhook_endpoints set enabled = false');
});
afterAll(async () => {
  await loop.stop(2000);
  await sender.close();
});

async function endpoint(url: string, eventTypes: string[] | null = null) {
  return insertEndpoint(pool(), ring, {
    url,
    description: 'test',
    eventTypes,
    feedCursor: await feedHead(pool()),
  });
}
const eventIds = (rs: Received[]) => rs.map((r) => JSON.parse(r.body).id as string);
const verify = (secret: string, r: Received) =>
  new Webhook(secret).verify(r.body, r.headers as Record<string, string>);

describe('webhook delivery', () => {
  it('delivers each new event once, signed so that standardwebhooks verifies it; older events are not sent', async () => {
    const sub = ++subscriber;
    const before = await emit(pool(), sub, 1);
    const receiver = await startReceiver();
    const { secret } = await endpoint(`${receiver.url}/hook`);
    const ids = await emit(pool(), sub, 3);
    await waitFor('3 deliveries', async () => receiver.received.length >= 3);
    await new Promise((r) => setTimeout(r, 200));
    expect(eventIds(receiver.received)).toEqual(ids);
    expect(ids).not.toContain(before[0]);
    for (const r of receiver.received) {
      expect(verify(secret, r)).toMatchObject({
        id: r.headers['webhook-id'],
        type: 'card.added',
        data: { subscriberId: sub },
      });
    }
    await receiver.close();
  });

  it('a 500 is retried with the same webhook-id, and every attempt is recorded', async () => {
    const receiver = await startReceiver((_r, res, n) =>
      n === 1 ? res.writeHead(500).end('{"title":"down"}') : res.end('ok'),
    );
    const { id, secret } = await endpoint(receiver.url);
    const [event] = await emit(pool(), ++subscriber);
    await waitFor('the retry', async () => receiver.received.length >= 2);
    expect(receiver.received.map((r) => r.headers['webhook-id'])).toEqual([event, event]);
    for (const r of receiver.received) verify(secret, r);
    const attempts = await waitFor('two attempts', async () => {
      const { rows } = await pool().query(
        'select attempt, outcome, status_code, error_code, excerpt, latency_ms from webhook_attempts where endpoint_id = $1 order by id',
        [id],
      );
      return rows.length === 2 && rows;
    });
    expect(attempts).toMatchObject([
      {
        attempt: 1,
        outcome: 'failed',
        status_code: 500,
        error_code: 'http_status',
        excerpt: '{"title":"down"}',
      },
      { attempt: 2, outcome: 'delivered', status_code: 200, error_code: null },
    ]);
    await receiver.close();
  });

  it('Retry-After is honoured: the retry comes no sooner than it asks', async () => {
    const receiver = await startReceiver((_r, res, n) =>
      n === 1 ? res.writeHead(429, { 'retry-after': '1' }).end() : res.end(),
    );
    await endpoint(receiver.url);
    await emit(pool(), ++subscriber);
    await waitFor('the retry', async () => receiver.received.length >= 2);
    // The schedule's own waits are at most 200 ms here: only Retry-After explains a second's gap.
    expect(receiver.received[1]!.at - receiver.received[0]!.at).toBeGreaterThanOrEqual(950);
    await receiver.close();
  });

  it("one subscriber's events arrive in commit order while the first is retried; another subscriber's are not held up", async () => {
    const [a, b] = [++subscriber, ++subscriber];
    let firstFailures = 0;
    const receiver = await startReceiver((r, res) => {
      const body = JSON.parse(r.body);
      if (body.id === firstA && firstFailures < 3) {
        firstFailures++;
        return res.writeHead(503).end();
      }
      res.end();
    });
    await endpoint(receiver.url);
    const idsA = await emit(pool(), a, 3);
    const firstA = idsA[0];
    const idsB = await emit(pool(), b, 2);
    await waitFor('all five delivered', async () => new Set(eventIds(receiver.received)).size === 5);
    const sequence = eventIds(receiver.received);
    // Subscriber a: the first event thrice refused, then each in order, none before its elder.
    expect(sequence.filter((id) => idsA.includes(id))).toEqual([
      firstA,
      firstA,
      firstA,
      firstA,
      idsA[1],
      idsA[2],
    ]);
    // Subscriber b went out while a's first was still being retried.
    expect(sequence.indexOf(idsB[1]!)).toBeLessThan(sequence.lastIndexOf(firstA!));
    await receiver.close();
  });

  it('a delivery failing past the schedule is dead-lettered, and the next event of its subscriber goes out', async () => {
    const sub = ++subscriber;
    let refuse = true;
    const receiver = await startReceiver((_r, res) => (refuse ? res.writeHead(500).end() : res.end()));
    const { id } = await endpoint(receiver.url);
    const [first] = await emit(pool(), sub);
    await waitFor(
      'the dead letter',
      async () => {
        const { rows } = await pool().query(
          "select status, attempts from webhook_deliveries where endpoint_id = $1 and status = 'dead'",
          [id],
        );
        return rows[0];
      },
      10_000,
    );
    refuse = false;
    const [second] = await emit(pool(), sub);
    await waitFor('the next event delivered', async () => {
      const { rows } = await pool().query(
        "select 1 from webhook_deliveries where event_id = $1 and status = 'delivered'",
        [second],
      );
      return rows.length === 1;
    });
    expect(eventIds(receiver.received)).toContain(second);
    expect(eventIds(receiver.received).filter((e) => e === first).length).toBeGreaterThanOrEqual(3);
    const { rows } = await pool().query('select failing_since from webhook_endpoints where id = $1', [id]);
    expect(rows[0].failing_since).toBeNull();
    await receiver.close();
  });

  it('a slow endpoint does not hold up another', async () => {
    const slow = await startReceiver(() => {});
    const fast = await startReceiver();
    await endpoint(slow.url);
    await endpoint(fast.url);
    const sub = ++subscriber;
    const ids = [...(await emit(pool(), sub, 4)), ...(await emit(pool(), sub + 1000, 4))];
    await waitFor('the fast endpoint has all eight', async () => fast.received.length >= 8, 5000);
    expect(new Set(eventIds(fast.received))).toEqual(new Set(ids));
    await slow.close();
    await fast.close();
  });

  it('during a secret rotation both secrets sign, and each verifies', async () => {
    const receiver = await startReceiver();
    const { id, secret: old } = await endpoint(receiver.url);
    const fresh = await rotateEndpointSecret(pool(), ring, id);
    await emit(pool(), ++subscriber);
    await waitFor('the delivery', async () => receiver.received.length >= 1);
    const r = receiver.received[0]!;
    expect(String(r.headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(verify(old, r)).toBeTruthy();
    expect(verify(fresh!, r)).toBeTruthy();
    await receiver.close();
  });

  it('only the types an endpoint asked for', async () => {
    const receiver = await startReceiver();
    await endpoint(receiver.url, ['card.removed']);
    const sub = ++subscriber;
    await emit(pool(), sub, 2, 'card.added');
    const [removed] = await emit(pool(), sub, 1, 'card.removed');
    await waitFor('the removal', async () => receiver.received.length >= 1);
    await new Promise((r) => setTimeout(r, 300));
    expect(eventIds(receiver.received)).toEqual([removed]);
    await receiver.close();
  });

  it('a worker that dies holding a delivery: another sends it once the lease ends, same webhook-id; the dead one’s late record is lost', async () => {
    const receiver = await startReceiver();
    const { id } = await endpoint(receiver.url);
    // Resting (no loop serves it), it gets one delivery, which a worker claims and then dies.
    await pool().query('update webhook_endpoints set enabled = false where id = $1', [id]);
    const before = await feedHead(pool());
    const [event] = await emit(pool(), ++subscriber);
    await replayEndpoint(pool(), id, before);
    // The dying worker's claim, as claimDeliveries makes it (which claims nothing of a disabled
    // endpoint): a lease of 600 ms.
    const { rows: leased } = await pool().query(
      `update webhook_deliveries set locked_by = 'dead-worker', locked_until = now() + interval '600 ms',
         attempts = attempts + 1, first_attempt_at = now()
       where endpoint_id = $1 returning id, event_id, subscriber_id, body, attempts`,
      [id],
    );
    const claimed: ClaimedDelivery | undefined = leased[0] && {
      id: Number(leased[0].id),
      endpointId: id,
      eventId: leased[0].event_id,
      subscriberId: Number(leased[0].subscriber_id),
      body: leased[0].body,
      attempt: Number(leased[0].attempts),
      spanContext: null,
    };
    await pool().query('update webhook_endpoints set enabled = true where id = $1', [id]);
    expect(claimed?.eventId).toBe(event);
    await waitFor('the delivery after the lease', async () => receiver.received.length >= 1, 10_000);
    expect(receiver.received.map((r) => r.headers['webhook-id'])).toEqual([event]);
    const { rows } = await waitFor('delivered', async () => {
      const r = await pool().query('select status, attempts from webhook_deliveries where endpoint_id = $1', [
        id,
      ]);
      return r.rows[0]?.status === 'delivered' && r;
    });
    expect(rows[0].attempts).toBe(2);
    const late = await finishAttempt(pool(), claimed!, {
      workerId: 'dead-worker',
      result: {
        delivered: false,
        status: null,
        latencyMs: 1,
        errorCode: 'timeout',
        excerpt: '',
        retryAfterMs: null,
      },
      waitMs: 10,
      giveUpAfterMs: 60_000,
      disableAfterMs: 86_400_000,
    });
    expect(late.finish).toBe('lost');
    const after = await pool().query('select status from webhook_deliveries where endpoint_id = $1', [id]);
    expect(after.rows[0].status).toBe('delivered');
    await receiver.close();
  });

  it('a stopping loop gives an attempt in flight back untried, for another worker to send; old history is pruned', async () => {
    const slow = await startReceiver(() => {});
    const { id } = await endpoint(slow.url);
    const ownSender = createWebhookSender({ timeoutMs: 10_000, allowPrivate: true });
    const own = startDeliveryLoop({
      pool: pool(),
      ring,
      sender: ownSender,
      logger,
      workerId: 'stopping-worker',
      leaseMs: 60_000,
      pollMs: 50,
      schedule,
    });
    // The shared loop must not take it: only this endpoint's row, only the stopping loop.
    await loop.stop(2000);
    const [event] = await emit(pool(), ++subscriber);
    await waitFor('the attempt in flight', async () => slow.received.length === 1);
    await own.stop(200);
    const { rows } = await pool().query(
      'select status, attempts, locked_by, first_attempt_at from webhook_deliveries where endpoint_id = $1',
      [id],
    );
    expect(rows).toEqual([{ status: 'pending', attempts: 0, locked_by: null, first_attempt_at: null }]);
    const attempts = await pool().query(
      'select count(*)::int as n from webhook_attempts where endpoint_id = $1',
      [id],
    );
    expect(attempts.rows[0].n).toBe(0);
    expect(event).toBeDefined();
    await ownSender.close();
    await slow.close();
    // Finished deliveries past the retention go, with their attempts; pending ones stay.
    await pool().query(
      `insert into webhook_deliveries (endpoint_id, event_id, subscriber_id, type, event_at, body, status, finished_at)
       values ($1, 'evt_old', 1, 'card.added', now(), '{}', 'delivered', now() - interval '31 days')`,
      [id],
    );
    expect(await pruneDeliveries(pool(), 30)).toBe(1);
    expect(
      (await pool().query('select count(*)::int as n from webhook_deliveries where endpoint_id = $1', [id]))
        .rows[0].n,
    ).toBe(1);
  });

  it('an endpoint that answers no 2xx for the whole disable period is disabled, with the reason and the way back', async () => {
    await loop.stop(2000);
    const down = await startReceiver((_r, res) => res.writeHead(503).end());
    const { id } = await endpoint(down.url);
    const ownSender = createWebhookSender({ timeoutMs: 1000, allowPrivate: true });
    const { logger: own, lines } = captureLogger();
    const disabling = startDeliveryLoop({
      pool: pool(),
      ring,
      sender: ownSender,
      logger: own,
      workerId: 'disabling-worker',
      leaseMs: 10_000,
      pollMs: 50,
      schedule: { ...schedule, giveUpAfterMs: 60_000, disableAfterMs: 400 },
    });
    try {
      await emit(pool(), ++subscriber);
      const row = await waitFor('the endpoint disabled', async () => {
        const { rows } = await pool().query(
          'select enabled, disabled_reason from webhook_endpoints where id = $1',
          [id],
        );
        return rows[0].enabled === false && rows[0];
      });
      expect(row.disabled_reason).toMatch(
        new RegExp(
          `^no 2xx since \\d{4}-\\d\\d-\\d\\dT[\\d:]+Z: disabled after failing for 0\\.4 s; fix the receiver, then cards-sync webhooks enable ${id}$`,
        ),
      );
      expect(lines.join('\n')).toMatch(/webhook endpoint disabled: no 2xx for days/);
      // The alert's gauge says it was cards-sync that disabled it; an operator's disable is not that.
      const other = await endpoint(down.url);
      await pool().query(
        "update webhook_endpoints set enabled = false, disabled_reason = 'by an operator' where id = $1",
        [other.id],
      );
      const exposed = await databaseGauges(database.handle.db);
      expect(exposed).toContain(`cards_sync_webhook_endpoint_auto_disabled{endpoint="${id}"} 1`);
      expect(exposed).toContain(`cards_sync_webhook_endpoint_auto_disabled{endpoint="${other.id}"} 0`);
      // Disabled: no more attempts.
      await new Promise((r) => setTimeout(r, 300));
      const before = down.received.length;
      await new Promise((r) => setTimeout(r, 300));
      expect(down.received.length).toBe(before);
    } finally {
      await disabling.stop(1000);
      await ownSender.close();
      await down.close();
    }
  });

  it('an idle loop with the outbox notifications wakes at a new event, not at its next poll', async () => {
    await loop.stop(2000);
    const receiver = await startReceiver();
    await endpoint(receiver.url);
    const signal = createChangeSignal(pool());
    const ownSender = createWebhookSender({ timeoutMs: 1000, allowPrivate: true });
    const woken = startDeliveryLoop({
      pool: pool(),
      ring,
      sender: ownSender,
      logger,
      workerId: 'woken',
      leaseMs: 10_000,
      pollMs: 60_000,
      signal,
      schedule,
    });
    try {
      // Let it go idle, then write an event: a minute's poll would not see it within the test.
      await new Promise((r) => setTimeout(r, 500));
      const started = Date.now();
      const [event] = await emit(pool(), ++subscriber);
      await waitFor('the woken delivery', async () => receiver.received.length >= 1, 5_000);
      expect(receiver.received[0]!.headers['webhook-id']).toBe(event);
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      await woken.stop(1000);
      await signal.close();
      await ownSender.close();
      await receiver.close();
    }
  });
});
