import type pg from 'pg';
import { readFeedEntries } from '../events/feed.js';
import { compareCursors, FANOUT_PAGE, insertDeliveries } from './fanout.js';

// `webhooks replay ID --since …`: sends an endpoint again every event from a point of the feed.
// Under the endpoint's row lock (its fan-out waits), the feed is read from that point to its end;
// each event the endpoint takes becomes a new delivery with the event's own id (the `webhook-id` a
// receiver deduplicates on), unless one is still pending; the endpoint's place moves to the end,
// so nothing read here is taken twice. A replay from beyond the endpoint's place starts at its
// place: events it has not taken yet are never skipped.

export interface ReplayOutcome {
  replayed: number;
  from: string;
  to: string;
  /** The first and the last event queued again (their ids are the `webhook-id`s sent); null when none was. */
  firstEventId: string | null;
  lastEventId: string | null;
}

export async function replayEndpoint(
  pool: pg.Pool,
  endpointId: number,
  since: string,
): Promise<ReplayOutcome | undefined> {
  const client = await pool.connect();
  try {
    await client.query('begin');
    const { rows } = await client.query<{ feed_cursor: string; event_types: string[] | null }>(
      'select feed_cursor, event_types from webhook_endpoints where id = $1 and removed_at is null for update',
      [endpointId],
    );
    const endpoint = rows[0];
    if (endpoint === undefined) {
      await client.query('rollback');
      return undefined;
    }
    const from = compareCursors(since, endpoint.feed_cursor) > 0 ? endpoint.feed_cursor : since;
    let after = from;
    let replayed = 0;
    let firstEventId: string | null = null;
    let lastEventId: string | null = null;
    for (;;) {
      const page = await readFeedEntries(client, { after, limit: FANOUT_PAGE });
      if (page.entries.length === 0) break;
      const wanted = page.entries.filter(
        (e) => endpoint.event_types === null || endpoint.event_types.includes(e.event.type),
      );
      const { rows: pending } = await client.query<{ event_id: string }>(
        "select event_id from webhook_deliveries where endpoint_id = $1 and status = 'pending' and event_id = any($2)",
        [endpointId, wanted.map((e) => e.event.id)],
      );
      const skip = new Set(pending.map((p) => p.event_id));
      const fresh = wanted.filter((e) => !skip.has(e.event.id));
      if (fresh.length > 0) {
        await insertDeliveries(client, endpointId, fresh, true);
        firstEventId ??= fresh[0]!.event.id;
        lastEventId = fresh.at(-1)!.event.id;
      }
      replayed += fresh.length;
      after = page.next;
    }
    const to = compareCursors(after, endpoint.feed_cursor) > 0 ? after : endpoint.feed_cursor;
    await client.query('update webhook_endpoints set feed_cursor = $2 where id = $1', [endpointId, to]);
    await client.query('commit');
    return { replayed, from, to, firstEventId, lastEventId };
  } catch (error) {
    await client.query('rollback').catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}
