import type pg from 'pg';
import { CHANGES_CHANNEL } from '../../db/events/outbox-sql.js';

// Change events for the webhook tests, written straight into the outbox (change_events) the way
// the sync writes them: one transaction each, so the feed's order is the order written here.

let cardId = 1000;

/** Writes one event per type for a subscriber, each in its own transaction; returns their ids in order. */
export async function emit(
  pool: pg.Pool,
  subscriberId: number,
  count = 1,
  type = 'card.added',
): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const id = ++cardId;
    const { rows } = await pool.query<{ id: string }>(
      `insert into change_events (subscriber_id, created_at, aggregatetype, aggregateid, type, payload)
       values ($1::bigint, now(), 'subscriber', $1::bigint::text, $2, $3) returning id`,
      [
        subscriberId,
        type,
        {
          subscriberId,
          cardId: id,
          binNumber: '4761-xxxx-xxxx-0043',
          changes: null,
          reason: null,
          syncRunId: null,
        },
      ],
    );
    // As the outbox writer does: a notification at commit wakes whoever waits for events.
    await pool.query(`select pg_notify('${CHANGES_CHANNEL}', '')`);
    ids.push(`evt_${rows[0]!.id}`);
  }
  return ids;
}
