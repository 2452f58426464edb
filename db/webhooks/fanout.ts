import type pg from 'pg';

// The statements of the fan-out and of a replay (src/webhooks/fanout.ts, src/webhooks/replay.ts):
// an endpoint's place in the change feed, read under its row lock and moved, and the delivery rows
// made from the events it takes.

type Queryable = Pick<pg.Pool, 'query'> | Pick<pg.ClientBase, 'query'>;

/** An endpoint's place in the feed and the event types it takes (null: every type). */
export interface EndpointPlace {
  feed_cursor: string;
  event_types: string[] | null;
}

/**
 * The cursor of the newest event below the oldest running transaction's (nothing at or below it
 * can still appear), or null when there is none.
 */
export async function lastSettledCursor(db: Queryable): Promise<string | null> {
  const { rows } = await db.query<{ cursor: string | null }>(
    `select txid::text || '-' || seq::text as cursor from change_events
     where txid < pg_snapshot_xmin(pg_current_snapshot())
     order by txid desc, seq desc limit 1`,
  );
  return rows[0]?.cursor ?? null;
}

/**
 * The place of an enabled endpoint, its row locked for this transaction; undefined when it is not
 * enabled or another transaction holds it (SKIP LOCKED: the fan-out does not wait).
 */
export async function lockEnabledEndpoint(
  client: Queryable,
  endpointId: number,
): Promise<EndpointPlace | undefined> {
  const { rows } = await client.query<EndpointPlace>(
    'select feed_cursor, event_types from webhook_endpoints where id = $1 and enabled for update skip locked',
    [endpointId],
  );
  return rows[0];
}

/** The place of an endpoint not removed, its row locked for this transaction (waiting for it). */
export async function lockLiveEndpoint(
  client: Queryable,
  endpointId: number,
): Promise<EndpointPlace | undefined> {
  const { rows } = await client.query<EndpointPlace>(
    'select feed_cursor, event_types from webhook_endpoints where id = $1 and removed_at is null for update',
    [endpointId],
  );
  return rows[0];
}

/** Moves an endpoint's place in the feed. */
export async function setFeedCursor(client: Queryable, endpointId: number, cursor: string): Promise<void> {
  await client.query('update webhook_endpoints set feed_cursor = $2 where id = $1', [endpointId, cursor]);
}

/** Which of these events have a delivery to the endpoint still pending. */
export async function pendingEventIds(
  client: Queryable,
  endpointId: number,
  eventIds: readonly string[],
): Promise<string[]> {
  const { rows } = await client.query<{ event_id: string }>(
    "select event_id from webhook_deliveries where endpoint_id = $1 and status = 'pending' and event_id = any($2)",
    [endpointId, eventIds],
  );
  return rows.map((r) => r.event_id);
}

/** One delivery to make: an event, its body as sent, and its sync's trace context. */
export interface DeliveryToInsert {
  eventId: string;
  subscriberId: number;
  type: string;
  body: string;
  /** The event's time, ISO 8601. */
  eventAt: string;
  spanContext: string | null;
}

/** Inserts deliveries in the order given: their ids keep it. */
export async function insertDeliveryRows(
  db: Queryable,
  endpointId: number,
  deliveries: readonly DeliveryToInsert[],
  replay: boolean,
): Promise<void> {
  await db.query(
    `insert into webhook_deliveries (endpoint_id, event_id, subscriber_id, type, event_at, body, replay,
         tracingspancontext)
     select $1, e.id, e.subscriber_id, e.type, e.event_at, e.body, $6, e.context
     from unnest($2::text[], $3::bigint[], $4::text[], $5::text[], $7::timestamptz[], $8::text[])
          with ordinality as e(id, subscriber_id, type, body, event_at, context, n)
     order by e.n`,
    [
      endpointId,
      deliveries.map((d) => d.eventId),
      deliveries.map((d) => d.subscriberId),
      deliveries.map((d) => d.type),
      deliveries.map((d) => d.body),
      replay,
      deliveries.map((d) => d.eventAt),
      deliveries.map((d) => d.spanContext),
    ],
  );
}

/**
 * The cursor of the last settled event written before `time` (feed order follows commit time), or
 * null when there is none.
 */
export async function lastCursorBefore(db: Queryable, time: Date): Promise<string | null> {
  const { rows } = await db.query<{ cursor: string }>(
    `select txid::text || '-' || seq::text as cursor from change_events
     where created_at < $1 and txid < pg_snapshot_xmin(pg_current_snapshot())
     order by txid desc, seq desc limit 1`,
    [time],
  );
  return rows[0]?.cursor ?? null;
}
