import type pg from 'pg';
import type { CardOwner } from './batch-read.js';

// `subscribers.cards_digest` says the subscriber's stored cards are exactly what its last answer
// listed, so that an identical answer reads and writes no card (the unchanged path). Whatever
// makes that untrue clears it, in the transaction that makes it untrue or, for a sync that raced
// another, in the sync's own.

/**
 * Recounts the active cards of subscribers whose card moved to another subscriber, and clears their
 * digest: what is stored for them is no longer what their last answer listed.
 */
export async function recountActiveCards(
  client: pg.PoolClient,
  subscriberIds: readonly number[],
): Promise<void> {
  if (subscriberIds.length === 0) return;
  await client.query({
    name: 'cards-sync-recount-active',
    text: `update subscribers s set active_cards = (
        select count(*) from saved_cards c where c.subscriber_id = s.subscriber_id and c.removed_at is null),
        cards_digest = null
      where s.subscriber_id = any($1::bigint[])`,
    values: [[...subscriberIds]],
  });
}

/**
 * Clears the digest just written for a subscriber when a card its answer listed is, by now, not
 * its active card. A card the answer listed unchanged is neither written nor locked by the sync,
 * so another subscriber's sync may take it after this one read it and commit before this one
 * writes: that sync cleared the digest, and this one's write would set it again, to an answer
 * whose cards are no longer all stored. Run after the write, in its transaction: the statement
 * sees every sync committed before it, and one committing later must first take the
 * `subscribers` row this transaction has locked. `listed` holds each card id once.
 */
export async function forgetDigestsOfTakenCards(
  client: pg.PoolClient,
  listed: readonly CardOwner[],
): Promise<void> {
  if (listed.length === 0) return;
  await client.query({
    name: 'cards-sync-forget-taken-digests',
    // By `= any`, not a join with unnest (see the removal in WRITE_BATCH).
    text: `update subscribers s set cards_digest = null
      where s.subscriber_id = any(array(
          select ($2::bigint[])[array_position($1::bigint[], c.id)] from saved_cards c
          where c.id = any($1::bigint[])
            and (c.removed_at is not null
              or c.subscriber_id <> ($2::bigint[])[array_position($1::bigint[], c.id)])))
        and s.cards_digest is not null`,
    values: [listed.map((c) => c.id), listed.map((c) => c.subscriberId)],
  });
}
