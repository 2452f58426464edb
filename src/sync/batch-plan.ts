import {
  type BatchRead,
  type CardClaim,
  type CardToWrite,
  claimKey,
  type KnownChange,
  type RunRow,
  type SavedCard,
  type StoredCard,
} from '../../db/sync/index.js';
import type { CardTokens } from '../tokens/index.js';
import type { CardsToApply } from './cards-to-apply.js';
import { emptyCounts, type ReconcilePlan, reconcile } from './reconcile.js';

// How a batch's answers turn into rows, once the stored ones are read (pure; apply-cards.ts writes).

/** What one answer of a batch turns into once the stored rows are known. */
export interface Planned {
  item: CardsToApply;
  /** Null: nothing to write but the run (an unknown e-mail with no cards, or superseded). */
  plan: ReconcilePlan | null;
  superseded: boolean;
  /** The answer's digest; null for an unknown e-mail. */
  digest: string | null;
  /** Identical to what is stored: nothing but the run and the subscriber's row is written. */
  unchanged: boolean;
  /** Cards the answer lists that another subscriber holds: they stay with it (a conflict). */
  claims: CardClaim[];
}

/** The stored rows of a batch, by owner and by id. */
export interface StoredIndex {
  newest: Map<number, Date>;
  unchanged: Set<number>;
  bySubscriber: Map<number, StoredCard[]>;
  byId: Map<number, StoredCard>;
}

export function indexStored(read: BatchRead): StoredIndex {
  const bySubscriber = new Map<number, StoredCard[]>();
  const byId = new Map<number, StoredCard>();
  for (const row of read.stored) {
    byId.set(row.id, row);
    const list = bySubscriber.get(row.subscriberId);
    if (list) list.push(row);
    else bySubscriber.set(row.subscriberId, [row]);
  }
  return { newest: read.newest, unchanged: read.unchanged, bySubscriber, byId };
}

/** An answer identical to what is stored: every card unchanged, nothing else. */
function unchangedPlan(cards: readonly SavedCard[]): ReconcilePlan {
  const counts = { ...emptyCounts(), cardsSeen: cards.length, unchanged: cards.length };
  return { inserts: [], updates: [], unchangedIds: cards.map((c) => c.id), removedIds: [], counts };
}

/**
 * An answer fetched before one already applied is older news: applying it would undo newer
 * removals or restores.
 */
export function isSuperseded(item: CardsToApply, stored: StoredIndex): boolean {
  if (item.subscriberId === null) return false;
  const newest = stored.newest.get(item.subscriberId);
  return newest !== undefined && newest.getTime() > item.run.startedAt.getTime();
}

/**
 * @param applying subscribers whose answers this batch writes: a card one of them holds and no
 *   longer lists may move to another answer of the batch that lists it.
 */
export function plan(
  item: CardsToApply,
  digest: string | null,
  stored: StoredIndex,
  tokens: CardTokens,
  applying: ReadonlySet<number>,
): Planned {
  const subscriberId = item.subscriberId;
  const none = { item, digest, unchanged: false, claims: [] };
  if (subscriberId === null) return { ...none, plan: null, superseded: false };
  if (isSuperseded(item, stored)) return { ...none, plan: null, superseded: true };
  if (stored.unchanged.has(subscriberId)) {
    return { ...none, plan: unchangedPlan(item.cards), superseded: false, unchanged: true };
  }
  // This subscriber's rows, and rows of others that its answer lists: cards that moved here (their
  // holder dropped them), or, while their holder still lists them, cards in conflict.
  const rows = [...(stored.bySubscriber.get(subscriberId) ?? [])];
  const claims: CardClaim[] = [];
  for (const c of item.cards) {
    const row = stored.byId.get(c.id);
    if (!row || row.subscriberId === subscriberId) continue;
    if (row.removedAt === null && !applying.has(row.subscriberId)) {
      claims.push({ cardId: c.id, holderSubscriberId: row.subscriberId, claimantSubscriberId: subscriberId });
    } else rows.push(row);
  }
  const sameToken = (row: StoredCard, token: string) => tokens.matches(row.id, row.token, token);
  if (claims.length === 0) {
    return { ...none, plan: reconcile(subscriberId, item.cards, rows, sameToken), superseded: false };
  }
  const claimed = new Set(claims.map((c) => c.cardId));
  const planned = reconcile(
    subscriberId,
    item.cards.filter((c) => !claimed.has(c.id)),
    rows,
    sameToken,
  );
  planned.counts.cardsSeen = item.cards.length;
  return { ...none, plan: planned, superseded: false, claims };
}

/**
 * A card to write, its token in stored form: an unchanged token keeps the value it has (no
 * re-encryption), unless it is stored in plain text while sealing is on; a new one is sealed.
 */
export function toWrite(card: SavedCard, row: StoredCard | undefined, tokens: CardTokens): CardToWrite {
  const { cardToken, ...rest } = card;
  const keep =
    row !== undefined &&
    (row.token.fingerprint !== null || !tokens.sealing) &&
    tokens.matches(row.id, row.token, cardToken);
  return { ...rest, token: keep ? row.token : tokens.store(card.id, cardToken) };
}

/**
 * The history rows of one answer. `newClaims`: its claims that open a conflict (a `conflict` row
 * each; a claim already open writes none); `resolving`: cards whose move ends a conflict.
 */
export function knownChanges(
  p: Planned,
  run: number,
  newClaims: ReadonlySet<string> = new Set(),
  resolving: ReadonlySet<string> = new Set(),
): KnownChange[] {
  const subscriberId = p.item.subscriberId!;
  const out: KnownChange[] = [];
  for (const c of p.claims) {
    if (!newClaims.has(claimKey(c))) continue;
    out.push({
      cardId: c.cardId,
      subscriberId,
      change: 'conflict',
      changedFields: null,
      previous: { subscriber_id: c.holderSubscriberId },
      reason: 'held_by_another',
      run,
    });
  }
  // A new card's 'added' row is its saved_cards row itself (added_change_id): none is written.
  for (const u of p.plan!.updates) {
    out.push({
      cardId: u.card.id,
      subscriberId,
      change: u.restored ? 'restored' : 'updated',
      changedFields: u.changedFields.length > 0 ? u.changedFields : null,
      previous: u.previous,
      reason: resolving.has(`${u.card.id}:${subscriberId}`) ? 'conflict_resolved' : null,
      run,
    });
    // A card now listed under this subscriber left its previous one: that one's history says so.
    if (u.previousSubscriberId !== undefined && !u.restored) {
      out.push({
        cardId: u.card.id,
        subscriberId: u.previousSubscriberId,
        change: 'removed',
        changedFields: null,
        previous: null,
        reason: 'moved',
        run,
      });
    }
  }
  return out;
}

/** Why a superseded answer wrote nothing. */
export const SUPERSEDED = 'a newer answer was applied while this one was in flight; nothing written';

export function runRow(p: Planned): RunRow {
  const counts = p.plan?.counts ?? { ...emptyCounts(), cardsSeen: p.item.cards.length };
  const run = p.item.run;
  return {
    email: run.email,
    trigger: run.trigger,
    jobId: run.jobId,
    refreshRunId: run.refreshRunId,
    startedAt: run.startedAt,
    subscriberId: p.item.subscriberId,
    status: p.superseded ? 'superseded' : 'succeeded',
    cardsSeen: p.item.subscriberId === null ? 0 : counts.cardsSeen,
    inserted: counts.inserted,
    updated: counts.updated,
    unchanged: counts.unchanged,
    restored: counts.restored,
    errorCode: p.superseded ? 'superseded' : null,
    errorMessage: p.superseded ? SUPERSEDED : null,
  };
}
