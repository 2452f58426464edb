import type pg from 'pg';
import { withTransaction } from '../../db/transaction.js';
import { lockLiveEndpoint, pendingEventIds, setFeedCursor } from '../../db/webhooks/index.js';
import { readFeedEntries } from '../events/index.js';
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
  // No such live endpoint: the transaction ends with nothing done.
  return withTransaction(pool, async (client) => {
    const endpoint = await lockLiveEndpoint(client, endpointId);
    if (endpoint === undefined) return undefined;
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
      const pending = await pendingEventIds(
        client,
        endpointId,
        wanted.map((e) => e.event.id),
      );
      const skip = new Set(pending);
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
    await setFeedCursor(client, endpointId, to);
    return { replayed, from, to, firstEventId, lastEventId };
  });
}
