import { createHash, type Hash, type Hmac } from 'node:crypto';
import type { StoredToken } from '../../db/sync/index.js';
import type { KeyRing } from './keyring.js';
import { TokenKeyError } from './keyring.js';

// How the write path stores and compares card tokens, whichever way CARD_TOKEN_ENCRYPTION is set.

export interface CardTokens {
  /** Whether new tokens are sealed (`CARD_TOKEN_ENCRYPTION=on`). */
  readonly sealing: boolean;
  /** The stored form of a new or changed token. */
  store(cardId: number, token: string): StoredToken;
  /**
   * Whether the stored token is `token`, without decrypting: fingerprints are compared under the
   * key that sealed the stored one. Throws {@link TokenKeyError} when it cannot tell.
   */
  matches(cardId: number, stored: StoredToken, token: string): boolean;
  /** The token itself (for `cards-sync token`); throws {@link TokenKeyError} when it cannot. */
  reveal(cardId: number, stored: StoredToken): string;
  /**
   * A fresh hash for an answer's digest (src/sync/digest.ts), which takes the tokens as they are:
   * an HMAC under a key of the ring (derived from the sealing key) when there is one, so the digest
   * never rests on a token alone; SHA-256 when there is none (tokens are then stored in plain text
   * anyway).
   */
  digestHash(): Hash | Hmac;
}

const noRing = (cardId: number) =>
  new TokenKeyError(
    `card ${cardId}: the stored token is sealed, but no key ring is set (CARD_TOKEN_KEYS): set the keys it was sealed under`,
    'token_key_unknown',
  );

/** `ring` seals when `sealing`; it also reads sealed rows when sealing is off (an explicit choice). */
export function cardTokens(sealing: boolean, ring: KeyRing | undefined): CardTokens {
  if (sealing && ring === undefined) throw new Error('sealing card tokens needs a key ring');
  return {
    sealing,
    store(cardId, token) {
      return sealing ? ring!.seal(cardId, token) : { value: token, fingerprint: null };
    },
    matches(cardId, stored, token) {
      if (stored.fingerprint === null) return stored.value === token;
      if (ring === undefined) throw noRing(cardId);
      return ring.fingerprintLike(cardId, stored.value, token) === stored.fingerprint;
    },
    reveal(cardId, stored) {
      if (stored.fingerprint === null) return stored.value;
      if (ring === undefined) throw noRing(cardId);
      return ring.open(cardId, stored.value);
    },
    digestHash() {
      return ring === undefined ? createHash('sha256') : ring.digestMac();
    },
  };
}
