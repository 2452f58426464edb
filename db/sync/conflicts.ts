import { sql } from 'drizzle-orm';
import type pg from 'pg';
import type { Executor } from '../client.js';

// card_conflicts: a card listed by two subscribers at once stays with the one that holds it (see
// db/schema/index.ts). The write path opens, refreshes and resolves conflicts in the batch's transaction,
// under the claimants' advisory locks.

/** A card one subscriber's answer lists while another subscriber holds it as active. */
export interface CardClaim {
  cardId: number;
  holderSubscriberId: number;
  claimantSubscriberId: number;
}

const key = (cardId: number, claimant: number) => `${cardId}:${claimant}`;

/**
 * Which of these claims are open conflicts already (`card:claimant` keys): only new ones get a
 * history row. A round trip of its own, made only by a batch that has claims.
 */
export async function openClaims(client: pg.PoolClient, claims: readonly CardClaim[]): Promise<Set<string>> {
  const r = await client.query<{ card_id: number; claimant_subscriber_id: number }>(
    `select card_id, claimant_subscriber_id from card_conflicts
      where resolved_at is null and card_id = any($1::bigint[])`,
    [claims.map((c) => c.cardId)],
  );
  return new Set(r.rows.map((row) => key(row.card_id, row.claimant_subscriber_id)));
}

export const claimKey = (c: CardClaim) => key(c.cardId, c.claimantSubscriberId);

/** Opens each claim as a conflict, or notes that the claimant listed the card again. */
export function upsertClaims(client: pg.PoolClient, claims: readonly CardClaim[], now: Date) {
  return client.query(
    `insert into card_conflicts (card_id, holder_subscriber_id, claimant_subscriber_id, opened_at, last_seen_at)
      select c.card_id, c.holder, c.claimant, $4, $4
      from unnest($1::bigint[], $2::bigint[], $3::bigint[]) as c(card_id, holder, claimant)
      order by c.card_id, c.claimant
    on conflict (card_id, claimant_subscriber_id) where resolved_at is null do update set
      last_seen_at = excluded.last_seen_at, holder_subscriber_id = excluded.holder_subscriber_id`,
    [
      claims.map((c) => c.cardId),
      claims.map((c) => c.holderSubscriberId),
      claims.map((c) => c.claimantSubscriberId),
      now,
    ],
  );
}

/**
 * Resolves the open conflicts of these claimants that their answers no longer raise: `moved` when
 * the claimant now holds the card (its holder's answer dropped it and this one took it),
 * `claimant_dropped` otherwise. Run after the batch's cards are written, in its transaction.
 */
export function resolveClaims(
  client: pg.PoolClient,
  claimants: readonly number[],
  stillClaimed: readonly CardClaim[],
  now: Date,
) {
  return client.query({
    name: 'cards-sync-resolve-conflicts',
    text: `update card_conflicts k set resolved_at = $4,
        resolution = case when exists (
            select 1 from saved_cards c
            where c.id = k.card_id and c.subscriber_id = k.claimant_subscriber_id and c.removed_at is null)
          then 'moved' else 'claimant_dropped' end
      where k.resolved_at is null and k.claimant_subscriber_id = any($1::bigint[])
        and not exists (
          select 1 from unnest($2::bigint[], $3::bigint[]) as s(card_id, claimant)
          where s.card_id = k.card_id and s.claimant = k.claimant_subscriber_id)`,
    values: [
      [...claimants],
      stillClaimed.map((c) => c.cardId),
      stillClaimed.map((c) => c.claimantSubscriberId),
      now,
    ],
  });
}

/** An open conflict on one card: who holds it, who else lists it, since when. */
export interface OpenConflict {
  holderSubscriberId: number;
  claimantSubscriberId: number;
  openedAt: Date;
}

/** The open conflicts of one card (none: the card is not in conflict). */
export async function openConflictsOf(db: Executor, cardId: number): Promise<OpenConflict[]> {
  const r = await db.execute<{ holder: string; claimant: string; opened_at: string }>(sql`
    select holder_subscriber_id as holder, claimant_subscriber_id as claimant, opened_at
    from card_conflicts where card_id = ${cardId} and resolved_at is null
    order by claimant_subscriber_id`);
  return r.rows.map((row) => ({
    holderSubscriberId: Number(row.holder),
    claimantSubscriberId: Number(row.claimant),
    openedAt: new Date(row.opened_at),
  }));
}

/** How many conflicts are open now, and since when the oldest. */
export async function conflictSummary(db: Executor): Promise<{ open: number; oldestOpenedAt: Date | null }> {
  const r = await db.execute<{ open: number; oldest: string | null }>(sql`
    select count(*)::int as open, min(opened_at) as oldest from card_conflicts where resolved_at is null`);
  const row = r.rows[0]!;
  return { open: row.open, oldestOpenedAt: row.oldest === null ? null : new Date(row.oldest) };
}
