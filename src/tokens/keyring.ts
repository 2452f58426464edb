import { createCipheriv, createDecipheriv, createHmac, type Hmac, hkdfSync, randomBytes } from 'node:crypto';

// Card tokens at rest (docs/configuration.md, docs/analytics.md): AES-256-GCM under a key ring. A sealed value names the key
// that sealed it, so several keys live side by side while `tokens rotate` moves rows to the first
// one. Beside each sealed value sits a keyed fingerprint (HMAC-SHA-256 under a key derived from
// the same key), so a sync can tell whether a token changed without decrypting anything.

/** `ct1:<key id>:<base64url of nonce (12 bytes) | ciphertext | tag (16 bytes)>`. */
const SEALED = /^ct1:([A-Za-z0-9_-]{1,32}):([A-Za-z0-9_-]+)$/;
const KEY_ID = /^[A-Za-z0-9_-]{1,32}$/;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

/** A stored token cannot be read: its key is not in the ring, or it was altered. Never names the token. */
export class TokenKeyError extends Error {
  override readonly name = 'TokenKeyError';
  constructor(
    message: string,
    /** `token_key_unknown`, `token_tampered` or `token_malformed`. */
    readonly code: 'token_key_unknown' | 'token_tampered' | 'token_malformed',
  ) {
    super(message);
  }
}

/** A malformed `CARD_TOKEN_KEYS`: the message says what is wrong, never the key. */
export class KeyRingError extends Error {
  override readonly name = 'KeyRingError';
}

interface RingKey {
  id: string;
  key: Buffer;
  fingerprintKey: Buffer;
}

/** A token as stored: the sealed value and its fingerprint. */
export interface SealedToken {
  value: string;
  fingerprint: string;
}

/** The key id a stored value was sealed under; undefined for a token stored in plain text. */
export function sealedKeyId(value: string): string | undefined {
  return SEALED.exec(value)?.[1];
}

const aad = (cardId: number) => Buffer.from(`cards-sync card_token ${cardId}`);

export class KeyRing {
  readonly #keys: Map<string, RingKey>;
  readonly #primary: RingKey;
  #primaryDigestKey: Buffer | undefined;

  constructor(keys: readonly { id: string; key: Buffer }[]) {
    if (keys.length === 0) throw new KeyRingError('the key ring is empty');
    this.#keys = new Map();
    for (const { id, key } of keys) {
      if (!KEY_ID.test(id))
        throw new KeyRingError(`key id ${JSON.stringify(id)} is not 1-32 of A-Z a-z 0-9 _ -`);
      if (key.length !== 32)
        throw new KeyRingError(`key ${id} is ${key.length} bytes; AES-256 needs exactly 32`);
      if (this.#keys.has(id)) throw new KeyRingError(`key id ${id} appears twice`);
      const fingerprintKey = Buffer.from(
        hkdfSync('sha256', key, Buffer.alloc(0), 'cards-sync card_token fingerprint', 32),
      );
      this.#keys.set(id, { id, key, fingerprintKey });
    }
    this.#primary = this.#keys.get(keys[0]!.id)!;
  }

  /** The key that seals: the first of the ring. */
  get primaryId(): string {
    return this.#primary.id;
  }

  get ids(): string[] {
    return [...this.#keys.keys()];
  }

  /** Seals a token under the first key, with a fresh nonce, bound to its card id. */
  seal(cardId: number, token: string): SealedToken {
    return { value: this.#seal(aad(cardId), token), fingerprint: fingerprint(this.#primary, token) };
  }

  /**
   * Seals another secret (a webhook signing secret) under the first key, bound to `context` (what
   * it is and whose, e.g. `webhook_secret ep_…`): a value moved to another row does not open.
   */
  sealSecret(context: string, secret: string): string {
    return this.#seal(Buffer.from(`cards-sync ${context}`), secret);
  }

  /** The secret inside a value {@link sealSecret} made for the same `context`. */
  openSecret(context: string, value: string): string {
    return this.#open(Buffer.from(`cards-sync ${context}`), value, context);
  }

  #seal(additional: Buffer, plain: string): string {
    const k = this.#primary;
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', k.key, nonce);
    cipher.setAAD(additional);
    const body = Buffer.concat([nonce, cipher.update(plain, 'utf8'), cipher.final(), cipher.getAuthTag()]);
    return `ct1:${k.id}:${body.toString('base64url')}`;
  }

  /** The token inside a sealed value; refuses (TokenKeyError) an unknown key or an altered value. */
  open(cardId: number, value: string): string {
    return this.#open(aad(cardId), value, `card ${cardId}`, cardId);
  }

  #open(additional: Buffer, value: string, what: string, cardId?: number): string {
    const m = SEALED.exec(value);
    if (!m) {
      throw new TokenKeyError(
        `${what}: the stored ${cardId === undefined ? 'secret' : 'token'} is not a sealed value (ct1:…)`,
        'token_malformed',
      );
    }
    const k = cardId === undefined ? this.#secretKey(what, m[1]!) : this.#key(cardId, m[1]!);
    const body = Buffer.from(m[2]!, 'base64url');
    if (body.length < NONCE_BYTES + TAG_BYTES) {
      throw new TokenKeyError(`${what}: the stored value is too short to be sealed`, 'token_malformed');
    }
    const decipher = createDecipheriv('aes-256-gcm', k.key, body.subarray(0, NONCE_BYTES));
    decipher.setAAD(additional);
    decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
    try {
      return Buffer.concat([
        decipher.update(body.subarray(NONCE_BYTES, body.length - TAG_BYTES)),
        decipher.final(),
      ]).toString('utf8');
    } catch {
      throw new TokenKeyError(
        cardId === undefined
          ? `${what}: the stored secret failed authentication under key ${k.id} (altered, or sealed for another row); refusing to decrypt it`
          : `card ${cardId}: the stored token failed authentication under key ${k.id} (altered, or sealed for another card); refusing to decrypt it`,
        'token_tampered',
      );
    }
  }

  #secretKey(what: string, id: string): RingKey {
    const k = this.#keys.get(id);
    if (k === undefined) {
      throw new TokenKeyError(
        `${what}: sealed under key ${id}, which CARD_TOKEN_KEYS does not hold: add that key back (keep old keys in the ring until \`cards-sync tokens rotate\` has finished)`,
        'token_key_unknown',
      );
    }
    return k;
  }

  /**
   * A fresh HMAC-SHA-256 under a key derived from the sealing key for answer digests alone
   * (src/sync/digest.ts): what it digests may hold tokens, and no digest rests on them unkeyed.
   */
  digestMac(): Hmac {
    this.#primaryDigestKey ??= Buffer.from(
      hkdfSync('sha256', this.#primary.key, Buffer.alloc(0), 'cards-sync answer digest', 32),
    );
    return createHmac('sha256', this.#primaryDigestKey);
  }

  /** The fingerprint `token` has under the sealing key (what a token sealed now would carry). */
  fingerprint(token: string): string {
    return fingerprint(this.#primary, token);
  }

  /** The fingerprint `token` would have under the key that sealed `value`. */
  fingerprintLike(cardId: number, value: string, token: string): string {
    const id = sealedKeyId(value);
    if (id === undefined) {
      throw new TokenKeyError(
        `card ${cardId}: the stored token is not a sealed value (ct1:…)`,
        'token_malformed',
      );
    }
    return fingerprint(this.#key(cardId, id), token);
  }

  #key(cardId: number, id: string): RingKey {
    const k = this.#keys.get(id);
    if (k === undefined) {
      throw new TokenKeyError(
        `card ${cardId}: the stored token is sealed under key ${id}, which CARD_TOKEN_KEYS does not hold: add that key back (keep old keys in the ring until \`cards-sync tokens rotate\` has finished)`,
        'token_key_unknown',
      );
    }
    return k;
  }
}

function fingerprint(k: RingKey, token: string): string {
  return createHmac('sha256', k.fingerprintKey).update(token, 'utf8').digest('base64url');
}

/**
 * Parses `keyId:base64-of-32-bytes[,keyId:…]` (standard or URL-safe base64; blanks and line breaks
 * around items are ignored, so a file may hold one key per line).
 */
export function parseKeyRing(raw: string): KeyRing {
  const items = raw
    .split(/[,\n]/)
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (items.length === 0) throw new KeyRingError('no keys: expected keyId:base64-of-32-bytes[,keyId:…]');
  const keys = items.map((item, i) => {
    const colon = item.indexOf(':');
    if (colon <= 0) {
      throw new KeyRingError(`item ${i + 1} is not keyId:base64-of-32-bytes (no key id before a colon)`);
    }
    const id = item.slice(0, colon);
    const encoded = item.slice(colon + 1);
    if (!KEY_ID.test(id)) throw new KeyRingError(`item ${i + 1}: the key id is not 1-32 of A-Z a-z 0-9 _ -`);
    if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(encoded)) throw new KeyRingError(`key ${id} is not base64`);
    return {
      id,
      key: Buffer.from(encoded, encoded.includes('-') || encoded.includes('_') ? 'base64url' : 'base64'),
    };
  });
  return new KeyRing(keys);
}

/** A fresh key for the ring, as `openssl rand -base64 32` would give. */
export function newKeyMaterial(): string {
  return randomBytes(32).toString('base64');
}
