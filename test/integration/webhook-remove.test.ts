import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  claimDeliveries,
  listEndpoints,
  pruneRemovedEndpoints,
  removeEndpoint,
  setEndpointEnabled,
} from '../../db/webhooks/index.js';
import { startDeliveryLoop } from '../../jobs/webhooks/delivery-loop.js';
import { parseKeyRing } from '../../src/tokens/index.js';
import {
  attemptSender,
  createWebhookSender,
  DEFAULT_SCHEDULE,
  endpointTarget,
  feedHead,
  insertEndpoint,
  listDeliveries,
  replayEndpoint,
  resealEndpointSecrets,
  takeEvents,
} from '../../src/webhooks/index.js';
import { CARD_TOKEN_KEYS } from '../support/fixtures.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';
import { waitFor } from '../support/queue-helpers.js';
import { emit } from '../support/webhook-events.js';
import { startReceiver } from '../support/webhook-receiver.js';

// `webhooks remove`: an endpoint taken away gets nothing more, even from a worker that claimed its
// deliveries before the removal; its past deliveries stay readable until the retention.

const database = useTestDatabase();
const ring = parseKeyRing(CARD_TOKEN_KEYS);
const { logger } = captureLogger();
const pool = () => database.handle.pool;
const sender = createWebhookSender({ timeoutMs: 1500, allowPrivate: true });
let receiver: Awaited<ReturnType<typeof startReceiver>>;
let subscriber = 500;

beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(async () => {
  await sender.close();
  await receiver.close();
});

async function endpoint(path: string) {
  return insertEndpoint(pool(), ring, {
    url: `${receiver.url}/${path}?token=query-secret`,
    description: 'remove',
    eventTypes: null,
    feedCursor: await feedHead(pool()),
  });
}
const sentTo = (path: string) => receiver.received.filter((r) => r.path.startsWith(`/${path}`));

describe('removing a webhook endpoint', () => {
  it('a worker that claimed deliveries before the removal sends none of them after it', async () => {
    const { id } = await endpoint('mid-claim');
    // Three subscribers: a claim takes the head of each one's queue.
    for (let i = 0; i < 3; i++) await emit(pool(), ++subscriber, 1);
    await takeEvents(pool(), id);
    const target = await endpointTarget(pool(), ring, id);
    const claimed = await claimDeliveries(pool(), {
      endpointId: id,
      limit: 8,
      workerId: 'w1',
      leaseMs: 60_000,
    });
    expect(claimed).toHaveLength(3);

    const removal = await removeEndpoint(pool(), id);
    expect(removal).toMatchObject({ removed: true, waiting: { pending: 3, pendingCapped: false } });

    const outcomes: string[] = [];
    const attempt = attemptSender({
      pool: pool(),
      sender,
      logger,
      workerId: 'w1',
      schedule: DEFAULT_SCHEDULE,
      signal: new AbortController().signal,
      onAttempt: (_endpoint, outcome) => outcomes.push(outcome),
    });
    for (const d of claimed) await attempt(d, target!);
    expect(sentTo('mid-claim')).toEqual([]);
    expect(outcomes).toEqual([]);
    // Given back untried, and claimed by nobody after.
    const { rows } = await pool().query(
      'select status, attempts, locked_by from webhook_deliveries where endpoint_id = $1 order by id',
      [id],
    );
    expect(rows).toEqual(Array(3).fill({ status: 'pending', attempts: 0, locked_by: null }));
    expect(
      await claimDeliveries(pool(), { endpointId: id, limit: 8, workerId: 'w2', leaseMs: 60_000 }),
    ).toEqual([]);
  });

  it('a running delivery loop sends nothing more to it, while another endpoint goes on', async () => {
    const gone = await endpoint('gone');
    await endpoint('kept');
    const loop = startDeliveryLoop({
      pool: pool(),
      ring,
      sender,
      logger,
      workerId: 'loop',
      leaseMs: 10_000,
      pollMs: 50,
    });
    try {
      const sub = ++subscriber;
      await emit(pool(), sub, 1);
      await waitFor(
        'the first event at both',
        async () => sentTo('gone').length >= 1 && sentTo('kept').length >= 1,
      );
      expect((await removeEndpoint(pool(), gone.id))?.removed).toBe(true);
      const later = await emit(pool(), sub, 2);
      await waitFor('the later events at the one kept', async () => sentTo('kept').length >= 3);
      expect(
        sentTo('kept')
          .slice(1)
          .map((r) => JSON.parse(r.body).id),
      ).toEqual(later);
      expect(sentTo('gone')).toHaveLength(1);
    } finally {
      await loop.stop(2000);
    }
  });

  it('erases its secrets, leaves every list, refuses enable, rotate and replay; its deliveries stay readable', async () => {
    const { id } = await endpoint('listed');
    await emit(pool(), ++subscriber, 2);
    await takeEvents(pool(), id);
    await pool().query(
      "update webhook_deliveries set status = 'delivered', finished_at = now() where endpoint_id = $1",
      [id],
    );
    expect((await removeEndpoint(pool(), id))?.removed).toBe(true);
    const { rows } = await pool().query(
      'select secret, previous_secret, enabled, removed_at from webhook_endpoints where id = $1',
      [id],
    );
    expect(rows[0]).toMatchObject({ secret: '', previous_secret: null, enabled: false });
    expect(rows[0].removed_at).toBeInstanceOf(Date);
    expect((await listEndpoints(pool())).map((e) => e.id)).not.toContain(id);
    expect(await endpointTarget(pool(), ring, id)).toBeUndefined();
    expect(await setEndpointEnabled(pool(), id, true, null)).toBe(false);
    expect(await replayEndpoint(pool(), id, '0-0')).toBeUndefined();
    expect(await removeEndpoint(pool(), id)).toMatchObject({ removed: false });
    expect(await removeEndpoint(pool(), 987_654)).toBeUndefined();
    // Nothing to re-seal, and no "unreadable" for its erased secret.
    expect((await resealEndpointSecrets(pool(), ring)).unreadable).toEqual([]);
    const past = await listDeliveries(pool(), { endpointId: id, failed: false, limit: 10 });
    expect(past.map((d) => d.status)).toEqual(['delivered', 'delivered']);
  });

  it('the retention drops a removed endpoint with all its deliveries once it was removed that long ago', async () => {
    const removed = async (path: string) => {
      const e = await endpoint(path);
      await emit(pool(), ++subscriber, 2);
      await takeEvents(pool(), e.id);
      await removeEndpoint(pool(), e.id);
      return e;
    };
    const old = await removed('old');
    const recent = await removed('recent');
    await pool().query("update webhook_endpoints set removed_at = now() - interval '31 days' where id = $1", [
      old.id,
    ]);
    expect(await pruneRemovedEndpoints(pool(), 30, 1)).toBe(1);
    expect(await pruneRemovedEndpoints(pool(), 30, 10)).toBe(1);
    const { rows } = await pool().query(
      'select e.id, count(d.id)::int as deliveries from webhook_endpoints e left join webhook_deliveries d on d.endpoint_id = e.id where e.id = any($1) group by e.id',
      [[old.id, recent.id]],
    );
    expect(rows).toEqual([{ id: recent.id, deliveries: 2 }]);
  });
});
