import type pg from 'pg';

// What `webhooks deliveries ID` and the ops page read of an endpoint's deliveries
// (src/webhooks/deliveries-report.ts shapes it).

type Queryable = Pick<pg.Pool, 'query'>;

/** One delivery with its last attempt (null columns when it has none), as the statement reads it. */
export interface DeliveryReportRow {
  // bigint columns: numbers where the pool parses them (db/client.ts), text otherwise.
  id: number | string;
  event_id: string;
  type: string;
  subscriber_id: number | string;
  status: 'pending' | 'delivered' | 'dead';
  replay: boolean;
  attempts: number;
  event_at: Date;
  next_attempt_at: Date | null;
  finished_at: Date | null;
  at: Date | null;
  status_code: number | null;
  error_code: string | null;
  latency_ms: number;
  excerpt: string;
}

/** The latest `limit` deliveries (newest first); `failed`: dead ones and pending ones that failed at least once. */
export async function latestDeliveryRows(
  db: Queryable,
  o: { endpointId: number; failed: boolean; limit: number },
): Promise<DeliveryReportRow[]> {
  const { rows } = await db.query<DeliveryReportRow>(
    `select d.id, d.event_id, d.type, d.subscriber_id, d.status, d.replay, d.attempts, d.event_at,
            d.next_attempt_at, d.finished_at, a.at, a.status_code, a.error_code, a.latency_ms, a.excerpt
     from webhook_deliveries d
     left join lateral (
       select at, status_code, error_code, latency_ms, excerpt from webhook_attempts
       where delivery_id = d.id order by id desc limit 1) a on true
     where d.endpoint_id = $1
       and (not $2 or d.status = 'dead' or (d.status = 'pending' and d.attempts > 0 and d.locked_by is null))
     order by d.id desc limit $3`,
    [o.endpointId, o.failed, o.limit],
  );
  return rows;
}

/**
 * When the event of an endpoint's oldest dead letter was written, or null when it has none: where
 * a replay of its dead letters starts (the ops page's replay button).
 */
export async function oldestDeadLetterAt(db: Queryable, endpointId: number): Promise<Date | null> {
  const { rows } = await db.query<{ at: Date | null }>(
    "select min(event_at) as at from webhook_deliveries where endpoint_id = $1 and status = 'dead'",
    [endpointId],
  );
  return rows[0]?.at ?? null;
}
