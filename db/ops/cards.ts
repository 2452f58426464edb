import { and, eq, isNull, or, sql } from 'drizzle-orm';
import type { SavedCard } from '../../src/api/schema.js';
import type { StoredCard } from '../../src/sync/reconcile.js';
import type { Tx } from '../client.js';
import { savedCards } from '../schema.js';

/** Rows per INSERT: 13 parameters a row stays far below Postgres' 65,535-parameter limit. */
export const UPSERT_BATCH = 2000;

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** Every row of a subscriber, plus any row whose id the upstream answer lists. */
export async function selectStoredCards(
  tx: Tx,
  subscriberId: number,
  ids: readonly number[],
): Promise<StoredCard[]> {
  const columns = {
    id: savedCards.id,
    subscriberId: savedCards.subscriberId,
    cardToken: savedCards.cardToken,
    binNumber: savedCards.binNumber,
    cardFamily: savedCards.cardFamily,
    cardBankCode: savedCards.cardBankCode,
    cardBankName: savedCards.cardBankName,
    companyId: savedCards.companyId,
    createDate: savedCards.createDate,
    removedAt: savedCards.removedAt,
  };
  const owned = eq(savedCards.subscriberId, subscriberId);
  // Ids go as one array parameter: no parameter limit, however many cards.
  const where =
    ids.length === 0 ? owned : or(owned, sql`${savedCards.id} = any(${sql.param([...ids])}::bigint[])`);
  return tx.select(columns).from(savedCards).where(where);
}

const distinctContent = sql`(
  ${savedCards.subscriberId}, ${savedCards.cardToken}, ${savedCards.binNumber}, ${savedCards.cardFamily},
  ${savedCards.cardBankCode}, ${savedCards.cardBankName}, ${savedCards.companyId}, ${savedCards.createDate}
) is distinct from (
  excluded.subscriber_id, excluded.card_token, excluded.bin_number, excluded.card_family,
  excluded.card_bank_code, excluded.card_bank_name, excluded.company_id, excluded.create_date
)`;

/**
 * Inserts new cards and rewrites changed or restored ones, in batches. A row whose content is
 * identical and which is not removed is never rewritten (the `setWhere`).
 */
export async function upsertCards(tx: Tx, cards: readonly SavedCard[], now: Date): Promise<void> {
  for (const batch of chunks(cards, UPSERT_BATCH)) {
    await tx
      .insert(savedCards)
      .values(
        batch.map((c) => ({
          id: c.id,
          subscriberId: c.subscriberId,
          cardToken: c.cardToken,
          binNumber: c.binNumber,
          cardFamily: c.cardFamily,
          cardBankCode: c.cardBankCode,
          cardBankName: c.cardBankName,
          companyId: c.companyId,
          createDate: new Date(c.createDate),
          firstSeenAt: now,
          lastSeenAt: now,
          updatedAt: now,
          removedAt: null,
        })),
      )
      .onConflictDoUpdate({
        target: savedCards.id,
        set: {
          subscriberId: sql`excluded.subscriber_id`,
          cardToken: sql`excluded.card_token`,
          binNumber: sql`excluded.bin_number`,
          cardFamily: sql`excluded.card_family`,
          cardBankCode: sql`excluded.card_bank_code`,
          cardBankName: sql`excluded.card_bank_name`,
          companyId: sql`excluded.company_id`,
          createDate: sql`excluded.create_date`,
          lastSeenAt: sql`excluded.last_seen_at`,
          updatedAt: sql`case when ${distinctContent} then excluded.updated_at else ${savedCards.updatedAt} end`,
          removedAt: sql`null`,
        },
        setWhere: sql`${distinctContent} or ${savedCards.removedAt} is not null`,
      });
  }
}

/** Moves only `last_seen_at` of cards present upstream and unchanged. */
export async function touchCards(tx: Tx, ids: readonly number[], now: Date): Promise<void> {
  if (ids.length === 0) return;
  await tx
    .update(savedCards)
    .set({ lastSeenAt: now })
    .where(and(sql`${savedCards.id} = any(${sql.param([...ids])}::bigint[])`, isNull(savedCards.removedAt)));
}

/** Soft-deletes cards that vanished upstream; returns the ids it really marked. */
export async function markRemoved(
  tx: Tx,
  subscriberId: number,
  ids: readonly number[],
  now: Date,
): Promise<number[]> {
  if (ids.length === 0) return [];
  const rows = await tx
    .update(savedCards)
    .set({ removedAt: now })
    .where(
      and(
        eq(savedCards.subscriberId, subscriberId),
        isNull(savedCards.removedAt),
        sql`${savedCards.id} = any(${sql.param([...ids])}::bigint[])`,
      ),
    )
    .returning({ id: savedCards.id });
  return rows.map((r) => r.id);
}

/** How many cards of the subscriber are present upstream now. */
export async function countActiveCards(tx: Tx, subscriberId: number): Promise<number> {
  const [row] = await tx
    .select({ n: sql<number>`count(*)::int` })
    .from(savedCards)
    .where(and(eq(savedCards.subscriberId, subscriberId), isNull(savedCards.removedAt)));
  return row?.n ?? 0;
}

/** Recounts the active cards of subscribers whose card moved to another subscriber. */
export async function recountActiveCards(tx: Tx, subscriberIds: readonly number[]): Promise<void> {
  if (subscriberIds.length === 0) return;
  await tx.execute(sql`
    update subscribers s set active_cards = (
      select count(*) from saved_cards c where c.subscriber_id = s.subscriber_id and c.removed_at is null)
    where s.subscriber_id = any(${sql.param([...subscriberIds])}::bigint[])`);
}
