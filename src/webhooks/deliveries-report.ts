import type pg from 'pg';

// What `webhooks deliveries ID` shows: the latest deliveries of an endpoint with their last attempt.

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
  const { rows } = await db.query(
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

/**
 * When the event of an endpoint's oldest dead letter was written, or null when it has none: where
 * a replay of its dead letters starts (the ops page's replay button).
 */
export async function oldestDeadLetterAt(
  db: Pick<pg.Pool, 'query'>,
  endpointId: number,
): Promise<Date | null> {
  const { rows } = await db.query<{ at: Date | null }>(
    "select min(event_at) as at from webhook_deliveries where endpoint_id = $1 and status = 'dead'",
    [endpointId],
  );
  return rows[0]?.at ?? null;
}
