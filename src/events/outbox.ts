import { type SQL, sql } from 'drizzle-orm';
import type pg from 'pg';
import type { Executor } from '../../db/client.js';
import { WRITE_EVENTS } from './outbox-sql.js';

// The transactional outbox (issue 37, DESIGN §7): every change a sync writes becomes one event in
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
}

/**
 * Sends the outbox statement on the writer's client, in its transaction, without waiting: a
 * pipelined caller sends it with the write it follows and the commit. Resolves to the number of
 * events written. Call it only for a write that changed something: an unchanged sync sends nothing,
 * and so writes no event byte. Not inside a savepoint: rows written there carry the
 * subtransaction's id as their xmin, which the statement would not recognise as its own.
 */
export async function writeChangeEvents(client: pg.ClientBase, w: WrittenChanges): Promise<number> {
  const subscriberIds = [...new Set(w.subscriberIds)];
  if (subscriberIds.length === 0) return 0;
  const { rows } = await client.query<{ events: number }>({
    name: 'cards-sync-write-events',
    text: WRITE_EVENTS,
    values: [subscriberIds, w.at],
  });
  return rows[0]?.events ?? 0;
}

/** `writeChangeEvents` inside a Drizzle transaction (the `not_found` path's). */
export async function writeChangeEventsIn(tx: Executor, w: WrittenChanges): Promise<number> {
  const subscriberIds = [...new Set(w.subscriberIds)];
  if (subscriberIds.length === 0) return 0;
  const values: Record<string, unknown> = { $1: `{${subscriberIds.join(',')}}`, $2: w.at };
  const parts: SQL[] = WRITE_EVENTS.split(/(\$[12])(?!\d)/).map((part) =>
    Object.hasOwn(values, part) ? sql`${values[part]}` : sql.raw(part),
  );
  const { rows } = await tx.execute<{ events: number }>(sql.join(parts));
  return rows[0]?.events ?? 0;
}
