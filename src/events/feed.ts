import type pg from 'pg';
import { cursorAhead, feedHeadRow, feedHeldBackAfter, readFeedRows } from '../../db/events/index.js';
import type { ChangeEventType } from '../../db/schema/index.js';
import { FEED_START, parseCursor } from './cursor.js';

// The pull feed (docs/events.md): events in (txid, seq) order, showing only the events of transactions
// older than every transaction still running.
//
// Why not seq alone: seq is taken at insert, and a transaction that took seq 10 may commit after
// one that took seq 11. A reader at 11 when 10 commits would never see it. Why this order: every
// transaction below the horizon (the oldest one still running, as PgQ does) has ended, so no
// event can appear below it any more; a reader that pages through (txid, seq) under that horizon never skips one.
// Two syncs of one subscriber never overlap (they take its advisory lock before their first
// write, which is what gives a transaction its id), so one subscriber's events come in the order
// its syncs committed. The price: a transaction that stays open holds the feed back until it ends
// (the feed never lies about order to go faster); syncs last milliseconds. Readers write nothing,
// so a read-only token can read the feed.

/** One event as the feed, the CLI and a webhook carry it (Standard Webhooks' shape). */
export interface ChangeEvent {
  /**
   * `evt_` + the row's uuid (Debezium's `id` header): stable across redeliveries. Not 32 bare hex
   * digits, the shape of a card token.
   */
  id: string;
  type: ChangeEventType;
  /** When the sync wrote it (its clock), ISO 8601 with milliseconds. */
  timestamp: string;
  data: Record<string, unknown>;
}

export interface FeedPage {
  events: ChangeEvent[];
  /** The cursor to ask from next (the last event's, or the one asked from when none came). */
  next: string;
}

/**
 * An event with what the feed itself never shows: the trace context of the sync that wrote it
 * (`change_events.tracingspancontext`, null while tracing was off), which the fan-out copies into
 * its deliveries.
 */
export interface FeedEntry {
  event: ChangeEvent;
  spanContext: string | null;
}

/** Most events one page may hold. */
export const MAX_LIMIT = 1000;

/**
 * A cursor past every place this database's feed can have given: its transaction id is one this
 * database has not reached yet (a cursor of another database's feed, say). Read from there, the
 * feed would show nothing until the database's transactions caught up, and then start in the middle.
 */
export class CursorAheadError extends Error {
  override readonly name = 'CursorAheadError';
  readonly code = 'cursor_ahead';
  constructor(
    readonly cursor: string,
    /** The feed's head: its newest event a reader can see, or where the next one will come after. */
    readonly head: string,
    /** Whether the feed holds no event a reader can see (none yet, or retention dropped them). */
    empty: boolean,
  ) {
    super(
      `cursor ${cursor} is beyond the change feed's head ${head}${empty ? ' (no event to read now)' : ''}: ` +
        `transaction ${cursor.split('-')[0]} has not ended in this database, so this feed never gave it (is it another database's?); ` +
        `go on from a "next" this feed gave, from ${head} for new events only, or from ${FEED_START} for every event kept`,
    );
  }
}

type Queryable = Pick<pg.Pool, 'query'> | Pick<pg.ClientBase, 'query'>;

/**
 * Refuses a cursor this feed cannot have given (a {@link CursorAheadError} naming the head), once
 * before a read or a follow: a cursor at the head is good, and stays good as events come after it.
 */
export async function checkCursor(db: Queryable, after: string | null | undefined): Promise<void> {
  const text = after ?? FEED_START;
  const cursor = parseCursor(text);
  if (!(await cursorAhead(db, cursor.txid, cursor.seq))) return;
  const head = await feedHeadRow(db);
  throw new CursorAheadError(text, head.last ?? head.horizon, head.last === null);
}

/** Reads one page after `after` (a cursor; FEED_START or null from the start). */
export async function readFeed(
  db: Queryable,
  o: { after?: string | null; limit: number },
): Promise<FeedPage> {
  const { entries, next } = await readFeedEntries(db, o);
  return { events: entries.map((e) => e.event), next };
}

/** {@link readFeed}, each event with its sync's trace context (the fan-out's read). */
export async function readFeedEntries(
  db: Queryable,
  o: { after?: string | null; limit: number },
): Promise<{ entries: FeedEntry[]; next: string }> {
  const after = o.after ?? FEED_START;
  const cursor = parseCursor(after);
  const rows = await readFeedRows(db, cursor.txid, cursor.seq, Math.min(Math.max(1, o.limit), MAX_LIMIT));
  const last = rows.at(-1);
  return {
    entries: rows.map((r) => ({
      event: { id: `evt_${r.id}`, type: r.type, timestamp: r.created_at.toISOString(), data: r.payload },
      spanContext: r.tracingspancontext,
    })),
    next: last ? `${last.txid}-${last.seq}` : after,
  };
}

/** Whether events past `after` exist that a running transaction still holds back. */
export async function feedHeldBack(db: Queryable, after: string | null | undefined): Promise<boolean> {
  const cursor = parseCursor(after ?? FEED_START);
  return feedHeldBackAfter(db, cursor.txid, cursor.seq);
}
