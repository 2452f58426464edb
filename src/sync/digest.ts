import type { SavedCard } from '../../db/sync/index.js';
import type { CardTokens } from '../tokens/index.js';

// The digest of an answer: what `subscribers.cards_digest` keeps of the cards a full-path success
// listed. Two answers with the same cards, in any order, have the same digest; a change to any
// column reconcile compares (src/sync/reconcile.ts changedFields) changes it. With a key ring the
// hash is keyed (CardTokens.digestHash), so the digest says nothing about the tokens it covers;
// one HMAC an answer, where a fingerprint per token cost five.

/** The keyed (or plain SHA-256) hash, base64url, of the cards sorted by id, every compared column of each. */
export function answerDigest(cards: readonly SavedCard[], tokens: CardTokens): string {
  const sorted = [...cards].sort((a, b) => a.id - b.id);
  const hash = tokens.digestHash();
  // JSON per card, a line each: strings are quoted and escaped, so no two different cards
  // serialize alike. One update: each is a call into native code.
  const lines = sorted.map((c) =>
    JSON.stringify([
      c.id,
      c.subscriberId,
      c.cardToken,
      c.binNumber,
      c.cardFamily,
      c.cardBankCode,
      c.cardBankName,
      c.companyId,
      // As reconcile compares it: the instant, in milliseconds.
      Date.parse(c.createDate),
    ]),
  );
  hash.update(lines.join('\n'));
  return hash.digest('base64url');
}
