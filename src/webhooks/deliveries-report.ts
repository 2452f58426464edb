import type pg from 'pg';
import { latestDeliveryRows } from '../../db/webhooks/index.js';

// What `webhooks deliveries ID` shows: the latest deliveries of an endpoint with their last attempt
// (the statements are db/webhooks/deliveries-report.ts's).

export interface DeliveryReport {
  id: number;
  eventId: string;
  type: string;
  subscriberId: number;
  status: 'pending' | 'delivered' | 'dead';
  replay: boolean;
  attempts: number;
  eventAt: Date;
  nextAttemptAt: Date | null;
  finishedAt: Date | null;
  last: {
    at: Date;
    statusCode: number | null;
    errorCode: string | null;
    latencyMs: number;
    excerpt: string;
  } | null;
}

/** The latest `limit` deliveries (newest first); `failed`: dead ones and pending ones that failed at least once. */
export async function listDeliveries(
  db: Pick<pg.Pool, 'query'>,
  o: { endpointId: number; failed: boolean; limit: number },
): Promise<DeliveryReport[]> {
  const rows = await latestDeliveryRows(db, o);
  return rows.map((r) => ({
    id: Number(r.id),
    eventId: r.event_id,
    type: r.type,
    subscriberId: Number(r.subscriber_id),
    status: r.status,
    replay: r.replay,
    attempts: r.attempts,
    eventAt: r.event_at,
    nextAttemptAt: r.status === 'pending' ? r.next_attempt_at : null,
    finishedAt: r.finished_at,
    last:
      r.at === null
        ? null
        : {
            at: r.at,
            statusCode: r.status_code,
            errorCode: r.error_code,
            latencyMs: r.latency_ms,
            excerpt: r.excerpt,
          },
  }));
}
