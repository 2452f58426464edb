import type { SavedCard, StoredCard } from '../../db/sync/index.js';

export type { StoredCard };

/** A card whose stored row must be rewritten: new content, a restore, or both. */
interface CardUpdate {
  card: SavedCard;
  /** Column names whose content changed; empty for a plain restore. */
  changedFields: string[];
  /**
   * The stored values of the changed fields (`card_token` only as `"changed"`), and for a restore
   * the `removed_at` it ends: what `saved_card_changes.previous` keeps.
   */
  previous: Record<string, unknown>;
  restored: boolean;
  /** Set when the card belonged to another subscriber until now. */
  previousSubscriberId?: number;
}

export interface SyncCounts {
  cardsSeen: number;
  inserted: number;
  updated: number;
  unchanged: number;
  removed: number;
  restored: number;
}

/** What one upstream answer means for the stored rows. */
export interface ReconcilePlan {
  inserts: SavedCard[];
  updates: CardUpdate[];
  /** Present and identical: only `last_seen_at` moves. */
  unchangedIds: number[];
  /** Active rows of the subscriber that the answer no longer lists. */
  removedIds: number[];
  counts: SyncCounts;
}

export const emptyCounts = (): SyncCounts => ({
  cardsSeen: 0,
  inserted: 0,
  updated: 0,
  unchanged: 0,
  removed: 0,
  restored: 0,
});

/** Whether a stored token is this token (compared without decrypting: see src/tokens/). */
export type SameToken = (stored: StoredCard, token: string) => boolean;

/** Compares content columns; returns the names (as in the table) of those that differ. */
function changedFields(stored: StoredCard, card: SavedCard, sameToken: SameToken): string[] {
  const fields: string[] = [];
  if (stored.subscriberId !== card.subscriberId) fields.push('subscriber_id');
  if (!sameToken(stored, card.cardToken)) fields.push('card_token');
  if (stored.binNumber !== card.binNumber) fields.push('bin_number');
  if (stored.cardFamily !== card.cardFamily) fields.push('card_family');
  if (stored.cardBankCode !== card.cardBankCode) fields.push('card_bank_code');
  if (stored.cardBankName !== card.cardBankName) fields.push('card_bank_name');
  if (stored.companyId !== card.companyId) fields.push('company_id');
  if (stored.createDate.getTime() !== Date.parse(card.createDate)) fields.push('create_date');
  return fields;
}

/** What the stored row held in each changed column, as `saved_card_changes.previous` keeps it. */
function previousValues(stored: StoredCard, fields: readonly string[], restored: boolean) {
  const value: Record<string, (s: StoredCard) => unknown> = {
    subscriber_id: (s) => s.subscriberId,
    // Never the token, nor anything derived from it: only that it changed.
    card_token: () => 'changed',
    bin_number: (s) => s.binNumber,
    card_family: (s) => s.cardFamily,
    card_bank_code: (s) => s.cardBankCode,
    card_bank_name: (s) => s.cardBankName,
    company_id: (s) => s.companyId,
    create_date: (s) => s.createDate.toISOString(),
  };
  const previous: Record<string, unknown> = {};
  for (const f of fields) previous[f] = value[f]!(stored);
  if (restored) previous.removed_at = stored.removedAt?.toISOString() ?? null;
  return previous;
}

/**
 * Reconciles one subscriber's upstream list against the stored rows (pure).
 *
 * @param subscriberId whose answer this is
 * @param upstream the validated answer (ids unique)
 * @param stored every stored row of this subscriber, plus any stored row whose id the answer lists
 * @param sameToken compares a stored token with an upstream one
 */
export function reconcile(
  subscriberId: number,
  upstream: readonly SavedCard[],
  stored: readonly StoredCard[],
  sameToken: SameToken,
): ReconcilePlan {
  const byId = new Map<number, StoredCard>();
  for (const row of stored) byId.set(row.id, row);
  const plan: ReconcilePlan = {
    inserts: [],
    updates: [],
    unchangedIds: [],
    removedIds: [],
    counts: emptyCounts(),
  };
  plan.counts.cardsSeen = upstream.length;
  const listed = new Set<number>();
  for (const card of upstream) {
    listed.add(card.id);
    const row = byId.get(card.id);
    if (row === undefined) {
      plan.inserts.push(card);
      plan.counts.inserted++;
      continue;
    }
    const fields = changedFields(row, card, sameToken);
    const restored = row.removedAt !== null;
    const moved = row.subscriberId !== card.subscriberId ? { previousSubscriberId: row.subscriberId } : {};
    if (restored) {
      const previous = previousValues(row, fields, true);
      plan.updates.push({ card, changedFields: fields, restored: true, previous, ...moved });
      plan.counts.restored++;
    } else if (fields.length > 0) {
      const previous = previousValues(row, fields, false);
      plan.updates.push({ card, changedFields: fields, restored: false, previous, ...moved });
      plan.counts.updated++;
    } else {
      plan.unchangedIds.push(card.id);
      plan.counts.unchanged++;
    }
  }
  for (const row of stored) {
    if (row.subscriberId === subscriberId && row.removedAt === null && !listed.has(row.id)) {
      plan.removedIds.push(row.id);
      plan.counts.removed++;
    }
  }
  return plan;
}
