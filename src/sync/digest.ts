import { createHash } from 'node:crypto';
import type { SavedCard } from '../cards.js';
import type { CardTokens } from '../tokens/card-tokens.js';

// The digest of an answer: what `subscribers.cards_digest` keeps of the cards a full-path success
// listed. Two answers with the same cards, in any order, have the same digest; a change to any
// column reconcile compares (src/sync/reconcile.ts changedFields) changes it. The token enters by
// its keyed fingerprint (CardTokens.digestPart), so the digest says nothing about it.

/** SHA-256 (base64url) of the cards sorted by id, every compared column of each. */
export function answerDigest(cards: readonly SavedCard[], tokens: CardTokens): string {
  const sorted = [...cards].sort((a, b) => a.id - b.id);
  const hash = createHash('sha256');
  for (const c of sorted) {
    // JSON per card: strings are quoted and escaped, so no two different cards serialize alike.
    hash.update(
      JSON.stringify([
        c.id,
        c.subscriberId,
        tokens.digestPart(c.cardToken),
        c.binNumber,
        c.cardFamily,
        c.cardBankCode,
        c.cardBankName,
        c.companyId,
        // As reconcile compares it: the instant, in milliseconds.
        Date.parse(c.createDate),
      ]),
    );
    hash.update('\n');
  }
  return hash.digest('base64url');
}
