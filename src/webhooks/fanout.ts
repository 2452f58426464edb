import type pg from 'pg';
import { withTransaction } from '../../db/transaction.js';
import {
  insertDeliveryRows,
  lastCursorBefore,
  lastSettledCursor,
  lockEnabledEndpoint,
  setFeedCursor,
} from '../../db/webhooks/index.js';
import {
  type ChangeEvent,
  FEED_START,
  type FeedEntry,
  feedHeldBack,
  MAX_LIMIT,
  readFeed,
  readFeedEntries,
} from '../events/index.js';

// How an endpoint takes events from the change feed (src/events/feed.ts), and nothing else of the
// sync: each endpoint keeps its place in the feed; a worker that holds the endpoint's row lock
// reads the next page after it and turns each event the endpoint wants into a delivery row, in
// feed order, in one transaction with the new place. Workers skip an endpoint another is serving.

/** Events one endpoint takes from the feed at a time. */
export const FANOUT_PAGE = 500;

/** The cursor of the feed's newest visible event: an endpoint added now starts after it. */
export async function feedHead(db: Pick<pg.Pool, 'query'>): Promise<string> {
  // A cursor at or below the head: nothing at or below the oldest running transaction's can still
  // appear. From there the feed itself is read to its end, so the head is the feed's, whatever
  // horizon it keeps (feed.ts).
  let head = (await lastSettledCursor(db)) ?? FEED_START;
  for (;;) {
    const page = await readFeed(db, { after: head, limit: MAX_LIMIT });
    head = page.next;
    if (page.events.length < MAX_LIMIT) return head;
  }
}

/** The body of one delivery: the event as the feed carries it (docs/events.md). */
const deliveryBody = (e: ChangeEvent) => JSON.stringify(e);

/** What one take of the feed came to. */
export interface Take {
  /** Events of the feed read (wanted by the endpoint or not): `limit` when more may wait. */
  read: number;
  /** Whether events past the new place exist that a running transaction still holds back. */
  heldBack: boolean;
}

/**
 * Moves one endpoint's place forward by up to `limit` events, making a delivery of each the
 * endpoint wants; undefined when another worker holds the endpoint (it is taking them now).
 */
export async function takeEvents(
  pool: pg.Pool,
  endpointId: number,
  limit = FANOUT_PAGE,
): Promise<Take | undefined> {
  // Not holding the endpoint ends the transaction with nothing done (it took no lock).
  return withTransaction(pool, async (client) => {
    const endpoint = await lockEnabledEndpoint(client, endpointId);
    if (endpoint === undefined) return undefined;
    const page = await readFeedEntries(client, { after: endpoint.feed_cursor, limit });
    const wanted = page.entries.filter(
      (e) => endpoint.event_types === null || endpoint.event_types.includes(e.event.type),
    );
    if (wanted.length > 0) await insertDeliveries(client, endpointId, wanted, false);
    if (page.next !== endpoint.feed_cursor) {
      await setFeedCursor(client, endpointId, page.next);
    }
    // A page short of the limit may have stopped at the horizon: the loop looks again soon if so,
    // as a transaction that holds events back may end without a notification (it wrote none).
    const heldBack = page.entries.length < limit && (await feedHeldBack(client, page.next));
    return { read: page.entries.length, heldBack };
  });
}

/**
 * Inserts deliveries in the order given: their ids keep it (the ordering of one subscriber's events
 * rests on that). Each keeps its event's trace context: its attempts' spans link to the sync.
 */
export async function insertDeliveries(
  db: Pick<pg.ClientBase, 'query'>,
  endpointId: number,
  entries: readonly FeedEntry[],
  replay: boolean,
): Promise<void> {
  await insertDeliveryRows(
    db,
    endpointId,
    entries.map((e) => ({
      eventId: e.event.id,
      subscriberId: Number(e.event.data.subscriberId),
      type: e.event.type,
      body: deliveryBody(e.event),
      eventAt: e.event.timestamp,
      spanContext: e.spanContext,
    })),
    replay,
  );
}

/** The cursor just before the first event written at or after `time` (feed order follows commit time). */
export async function feedCursorAt(db: Pick<pg.Pool, 'query'>, time: Date): Promise<string> {
  return (await lastCursorBefore(db, time)) ?? FEED_START;
}

/** Orders two feed cursors (`<txid>-<seq>`). */
export function compareCursors(a: string, b: string): number {
  const [at, as] = a.split('-').map(BigInt) as [bigint, bigint];
  const [bt, bs] = b.split('-').map(BigInt) as [bigint, bigint];
  return at !== bt ? (at < bt ? -1 : 1) : as === bs ? 0 : as < bs ? -1 : 1;
}
