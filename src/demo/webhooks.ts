import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { countEventsAfter } from '../../db/events/index.js';
import { deleteEndpoint } from '../../db/webhooks/index.js';
import { startWebhookDelivery, type WebhookDelivery } from '../../jobs/webhooks/index.js';
import type { Config } from '../config/index.js';
import { parseCursor } from '../events/index.js';
import type { Logger } from '../logging/index.js';
import type { KeyRing } from '../tokens/index.js';
import { feedHead, insertEndpoint } from '../webhooks/index.js';
import { type DemoReceiver, startDemoReceiver } from './receiver.js';

// The demo's webhooks: a receiver on loopback, registered as an endpoint from the feed's head (so
// it gets this run's events and no older ones), and delivery running beside the demo's worker as
// it runs in every worker. The endpoint lives in the demo's database: it goes with it, or, in a
// database the demo was told to use, is deleted on exit (its deliveries go with it, on cascade).

export interface DemoWebhooks {
  url: string;
  /**
   * Waits until the receiver has verified every change event committed since the endpoint was
   * added (or `timeoutMs` passes); the summary line.
   */
  summary(timeoutMs: number): Promise<string>;
  /** Stops delivery and the receiver; with `deleteEndpoint`, removes the endpoint too. */
  stop(o: { deleteEndpoint: boolean }): Promise<void>;
}

export async function startDemoWebhooks(
  config: Config,
  ring: KeyRing,
  pool: pg.Pool,
  logger: Logger,
): Promise<DemoWebhooks> {
  let secret: string | undefined;
  const receiver: DemoReceiver = await startDemoReceiver(() => secret);
  let endpointId: number | undefined;
  let cursor = parseCursor('0-0');
  let delivery: WebhookDelivery | undefined;
  const stop = async (o: { deleteEndpoint: boolean }) => {
    await delivery?.stop(5000);
    await receiver.close();
    if (o.deleteEndpoint && endpointId !== undefined) {
      await deleteEndpoint(pool, endpointId).catch(() => {});
    }
  };
  try {
    const head = await feedHead(pool);
    cursor = parseCursor(head);
    const added = await insertEndpoint(pool, ring, {
      url: receiver.url,
      description: 'npm run demo: its local receiver',
      eventTypes: null,
      feedCursor: head,
    });
    endpointId = added.id;
    secret = added.secret;
    // Loopback is refused to a real endpoint (the SSRF guard); the demo's own receiver is allowed.
    delivery = startWebhookDelivery(
      { ...config, tokens: { ...config.tokens, ring }, webhooks: { ...config.webhooks, allowPrivate: true } },
      logger,
      'demo',
    );
  } catch (error) {
    await stop({ deleteEndpoint: true });
    throw error;
  }

  return {
    url: receiver.url,
    async summary(timeoutMs) {
      // Every event after the endpoint's place in the feed is its own: the demo's syncs', and any
      // other job's that its worker ran in a queue it was told to use.
      const expected = await countEventsAfter(pool, cursor);
      const deadline = Date.now() + timeoutMs;
      while (receiver.counts().events < expected && Date.now() < deadline) await sleep(100);
      const c = receiver.counts();
      const types = Object.entries(c.byType)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([type, n]) => `${type} ${n}`)
        .join(', ');
      const verified =
        c.rejected === 0 ? 'all signatures verified' : `${c.rejected} deliveries failed verification`;
      const line = `   webhooks: ${c.events} events received at ${receiver.url}, ${verified}${types ? `: ${types}` : ''}`;
      const missing =
        c.events < expected
          ? `\n   (${expected - c.events} of the run's ${expected} change events not received within ${timeoutMs / 1000} s)`
          : '';
      return line + missing;
    },
    stop,
  };
}
