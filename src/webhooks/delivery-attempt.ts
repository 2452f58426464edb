import type pg from 'pg';
import {
  type ClaimedDelivery,
  endpointLive,
  finishAttempt,
  releaseDelivery,
} from '../../db/webhooks/index.js';
import type { Logger } from '../logging/index.js';
import { type ActiveSpan, tracing } from '../tracing/index.js';
import { type RetrySchedule, retryWaitMs } from './backoff.js';
import type { WebhookSender } from './deliver-http.js';
import { signedHeaders } from './signing.js';

// One delivery attempt of the loop (jobs/webhooks/delivery-loop.ts): signed, sent, recorded, logged.

/** Where an endpoint's deliveries go, and the secrets that sign them. */
export type Target = { url: string; secrets: string[] };

export interface AttemptOptions {
  pool: pg.Pool;
  sender: WebhookSender;
  logger: Logger;
  workerId: string;
  schedule: RetrySchedule;
  /** Aborted when the loop stops: the attempt is cut and its delivery given back untried. */
  signal: AbortSignal;
  onAttempt?: (
    endpointId: number,
    outcome: 'delivered' | 'retry' | 'dead' | 'lost',
    latencyMs: number,
  ) => void;
}

/**
 * One attempt. While tracing is on it runs in a span of its own trace, `webhook deliver`, linked
 * to the span of the sync that wrote the event; undici's HTTP span is its child. The span holds
 * ids, the attempt, the status and the outcome: never the URL, a secret or the body.
 */
export function attemptSender(o: AttemptOptions): (d: ClaimedDelivery, target: Target) => Promise<void> {
  const schedule = o.schedule;

  async function deliver(d: ClaimedDelivery, target: Target, span: ActiveSpan): Promise<void> {
    // Claimed before `webhooks remove` committed (the claim and the removal may cross, and the
    // loop keeps an endpoint's target for a second): nothing goes to an endpoint taken away.
    if (!(await endpointLive(o.pool, d.endpointId))) {
      span.set({ 'cards_sync.webhook.outcome': 'removed' });
      await releaseDelivery(o.pool, d, o.workerId);
      return;
    }
    const headers = signedHeaders(target.secrets, d.eventId, Math.floor(Date.now() / 1000), d.body);
    const result = await o.sender.post(target.url, headers, d.body, o.signal);
    span.set({
      'http.response.status_code': result.status ?? undefined,
      'cards_sync.webhook.error': result.errorCode ?? undefined,
    });
    if (result.errorCode === 'stopped') {
      span.set({ 'cards_sync.webhook.outcome': 'stopped' });
      await releaseDelivery(o.pool, d, o.workerId);
      return;
    }
    const waitMs = retryWaitMs(d.attempt, result.retryAfterMs, schedule);
    const { finish, disabled } = await finishAttempt(o.pool, d, {
      workerId: o.workerId,
      result,
      waitMs,
      giveUpAfterMs: schedule.giveUpAfterMs,
      disableAfterMs: schedule.disableAfterMs,
    });
    span.set({ 'cards_sync.webhook.outcome': finish });
    o.onAttempt?.(d.endpointId, finish, result.latencyMs);
    const about = { endpoint: d.endpointId, delivery: d.id, event: d.eventId, attempt: d.attempt };
    if (finish === 'dead') {
      o.logger.warn(
        { ...about, status: result.status, error: result.errorCode },
        'webhook delivery dead-lettered after a day of failures',
      );
    } else if (finish === 'retry') {
      o.logger.info(
        { ...about, status: result.status, error: result.errorCode, waitMs },
        'webhook delivery failed; retrying',
      );
    }
    if (disabled) {
      o.logger.error(
        { endpoint: d.endpointId },
        'webhook endpoint disabled: no 2xx for days (cards-sync webhooks enable ID once fixed)',
      );
    }
  }

  return function attempt(d: ClaimedDelivery, target: Target): Promise<void> {
    const sync = tracing().contextFromText(d.spanContext);
    return tracing().inSpan(
      'webhook deliver',
      {
        kind: 'producer',
        root: true,
        attributes: {
          'cards_sync.webhook.endpoint_id': d.endpointId,
          'cards_sync.webhook.delivery_id': d.id,
          'cards_sync.event_id': d.eventId,
          'cards_sync.attempt': d.attempt,
        },
        ...(sync ? { links: [sync] } : {}),
      },
      (span) => deliver(d, target, span),
    );
  };
}
