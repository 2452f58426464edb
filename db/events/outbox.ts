import { type SQL, sql } from 'drizzle-orm';
import type pg from 'pg';
import type { Executor } from '../client.js';
import { WRITE_EVENTS } from './outbox-sql.js';

// The transactional outbox (docs/events.md): every change a sync writes becomes one event in
// `change_events`, in the same transaction. The writers of history call `writeChangeEvents` after
// their own write, in their transaction; the events are made from the rows that write left (its
// history rows and the cards it stored first), so the two can never disagree.

/** Whose changes, written when: what a write tells the outbox. */
export interface WrittenChanges {
  /**
   * Every subscriber that may have a history row or a new card in the write: the answers'
   * subscribers, and the former holders of cards that moved.
   */
  subscriberIds: readonly number[];
  /** The write's clock: its history's `changed_at` and its new cards' `first_seen_at`. */
  at: Date;
  /**
   * While tracing is on: the trace context of each subscriber's sync in the write (the stored text
   * of `tracing().contextText`), which its events carry in `tracingspancontext`; a card that moved
   * carries its taker's. Absent or empty: every event's is null.
   */
  spanContexts?: ReadonlyMap<number, string>;
}

/** $3 of WRITE_EVENTS: each subscriber's context in `subscriberIds`' order, or null when there is none. */
function contextsOf(subscriberIds: readonly number[], w: WrittenChanges): (string | null)[] | null {
  const contexts = w.spanContexts;
  if (contexts === undefined || contexts.size === 0) return null;
  return subscriberIds.map((id) => contexts.get(id) ?? null);
}

/** A Postgres array literal of text values (for a statement whose parameters Drizzle passes one by one). */
function textArrayLiteral(values: readonly (string | null)[]): string {
  const item = (v: string | null) => (v === null ? 'NULL' : `"${v.replace(/[\\"]/g, (c) => `\\${c}`)}"`);
  return `{${values.map(item).join(',')}}`;
}

/** How many events of each type a write left, e.g. `{"card.added": 3}`. */
export type EventCounts = Record<string, number>;

/**
 * Sends the outbox statement on the writer's client, in its transaction, without waiting: a
 * pipelined caller sends it with the write it follows and the commit. Resolves to how many events
 * of each type it wrote: the caller tells {@link eventsCommitted} once its commit is known. Call it only for a write that changed something: an unchanged sync sends nothing,
 * and so writes no event byte. Not inside a savepoint: rows written there carry the
 * subtransaction's id as their xmin, which the statement would not recognise as its own.
 */
export async function writeChangeEvents(client: pg.ClientBase, w: WrittenChanges): Promise<EventCounts> {
  const subscriberIds = [...new Set(w.subscriberIds)];
  if (subscriberIds.length === 0) return {};
  const { rows } = await client.query<{ types: EventCounts }>({
    name: 'cards-sync-write-events',
    text: WRITE_EVENTS,
    values: [subscriberIds, w.at, contextsOf(subscriberIds, w)],
  });
  return rows[0]?.types ?? {};
}

/** `writeChangeEvents` inside a Drizzle transaction (the `not_found` path's). */
export async function writeChangeEventsIn(tx: Executor, w: WrittenChanges): Promise<EventCounts> {
  const subscriberIds = [...new Set(w.subscriberIds)];
  if (subscriberIds.length === 0) return {};
  const contexts = contextsOf(subscriberIds, w);
  const values: Record<string, unknown> = {
    $1: `{${subscriberIds.join(',')}}`,
    $2: w.at,
    $3: contexts === null ? null : textArrayLiteral(contexts),
  };
  const parts: SQL[] = WRITE_EVENTS.split(/(\$[123])(?!\d)/).map((part) =>
    Object.hasOwn(values, part) ? sql`${values[part]}` : sql.raw(part),
  );
  const { rows } = await tx.execute<{ types: EventCounts }>(sql.join(parts));
  return rows[0]?.types ?? {};
}

const committedListeners = new Set<(counts: EventCounts) => void>();

/**
 * Called by a writer once its transaction committed, with what {@link writeChangeEvents} answered:
 * the listeners (a worker's `cards_sync_change_events_total`) count only events that exist.
 */
export function eventsCommitted(counts: EventCounts): void {
  if (Object.keys(counts).length === 0) return;
  for (const listener of committedListeners) listener(counts);
}

/** Listens to {@link eventsCommitted} in this process; returns the way to stop. */
export function onEventsCommitted(listener: (counts: EventCounts) => void): () => void {
  committedListeners.add(listener);
  return () => committedListeners.delete(listener);
}
