import type { SavedCard } from '../../db/sync/index.js';
import type { CardTokens } from '../tokens/index.js';

// The digest of an answer: what `subscribers.cards_digest` keeps of the cards a full-path success
// listed. Two answers with the same cards, in any order, have the same digest; a change to any
// column reconcile compares (src/sync/reconcile.ts changedFields) changes it. With a key ring the
// hash is keyed (CardTokens.digestHash), so the digest says nothing about the tokens it covers;
// one HMAC an answer, where a fingerprint per token cost five.
//
// Kept to its first 128 bits (22 base64url characters; 43 were stored before): the digest sits in the
// `subscribers` row every sync rewrites, so each byte of it is paid in WAL by every unchanged sync,
// twice (the row's page image after a checkpoint, and the span of the update record between the
// columns a sync changes): 42 B a sync (docs/benchmarks.md, bench:wal-cli). 128 bits is the HMAC
// truncation RFC 2104 allows at half the hash and leaves a 2^-128 chance that a changed answer
// reads as the stored one. A digest of the other length (a row written by the release before, or
// by a worker of it during a rolling upgrade) equals no digest of this one: that sync takes the
// full path, which compares every card and rewrites only what differs, and stores the short one.

/** Bytes of the hash the digest keeps. */
const DIGEST_BYTES = 16;

/** The keyed (or plain SHA-256) hash's first 128 bits, base64url, of the cards sorted by id, every compared column of each. */
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
  return hash.digest().subarray(0, DIGEST_BYTES).toString('base64url');
}
