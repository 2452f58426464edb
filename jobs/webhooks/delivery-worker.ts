import { createDb } from '../../db/client.js';
import type { Config } from '../../src/config/index.js';
import { createChangeSignal } from '../../src/events/index.js';
import type { Logger } from '../../src/logging/index.js';
import { createWebhookSender } from '../../src/webhooks/index.js';
import { type DeliveryLoop, type DeliveryOptions, startDeliveryLoop } from './delivery-loop.js';

// Webhook delivery as the worker command runs it: its own Postgres pool and HTTP agent beside the
// sync worker's, so neither waits for the other's connections.

export interface WebhookDelivery {
  stop(timeoutMs: number): Promise<void>;
}

/** Starts delivery in this worker; undefined (with a warning) when there is no key ring to open secrets. */
export function startWebhookDelivery(
  config: Config,
  logger: Logger,
  workerId: string,
  extra: Pick<DeliveryOptions, 'onAttempt' | 'schedule'> = {},
): WebhookDelivery | undefined {
  const ring = config.tokens.ring;
  if (ring === undefined) {
    logger.warn(
      'webhook delivery is off in this worker: CARD_TOKEN_KEYS is not set, and the signing secrets are sealed under it',
    );
    return undefined;
  }
  const handle = createDb(config.databaseUrl, {
    // The loop's pass, the attempts' finishes (one statement each when delivered), and the LISTEN
    // connection of the wake-ups.
    max: 8,
    applicationName: 'cards-sync webhooks',
    timeoutMs: config.databaseTimeoutMs,
  });
  const sender = createWebhookSender({
    timeoutMs: config.webhooks.timeoutMs,
    allowPrivate: config.webhooks.allowPrivate,
  });
  const signal = createChangeSignal(handle.pool);
  const loop: DeliveryLoop = startDeliveryLoop({
    pool: handle.pool,
    ring,
    sender,
    logger,
    workerId,
    leaseMs: config.webhooks.timeoutMs + 30_000,
    retentionDays: config.changeEventsRetentionDays,
    signal,
    ...extra,
  });
  return {
    async stop(timeoutMs) {
      await loop.stop(timeoutMs);
      await signal.close().catch(() => {});
      await Promise.allSettled([sender.close(), handle.close()]);
    },
  };
}
