import { createHmac, randomBytes } from 'node:crypto';

// Standard Webhooks signing (standardwebhooks.com, docs/webhooks.md): `webhook-signature` is `v1,` and the
// base64 HMAC-SHA256 of `id.timestamp.body` under the secret's bytes (the base64 after `whsec_`).
// During a rotation both secrets sign, their signatures separated by a space; a receiver holding
// either one verifies.

const PREFIX = 'whsec_';
/** Bytes of a new secret: the specification asks for 24 to 64. */
const SECRET_BYTES = 32;

/** A malformed signing secret; the message never holds the secret. */
export class WebhookSecretError extends Error {
  override readonly name = 'WebhookSecretError';
}

/** A fresh signing secret, `whsec_` + base64 of 32 random bytes. */
export function newWebhookSecret(): string {
  return `${PREFIX}${randomBytes(SECRET_BYTES).toString('base64')}`;
}

/** The key bytes of a `whsec_…` secret. */
export function secretKey(secret: string): Buffer {
  if (!secret.startsWith(PREFIX)) throw new WebhookSecretError('a webhook secret starts with whsec_');
  const encoded = secret.slice(PREFIX.length);
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded))
    throw new WebhookSecretError('a webhook secret is whsec_ + base64');
  const key = Buffer.from(encoded, 'base64');
  if (key.length < 24 || key.length > 64) {
    throw new WebhookSecretError(`a webhook secret holds 24 to 64 bytes (this one ${key.length})`);
  }
  return key;
}

/** One `v1,<base64>` signature of a message. */
export function signature(secret: string, id: string, timestampSeconds: number, body: string): string {
  const mac = createHmac('sha256', secretKey(secret));
  mac.update(`${id}.${timestampSeconds}.`, 'utf8');
  mac.update(body, 'utf8');
  return `v1,${mac.digest('base64')}`;
}

/** The three headers of one delivery (lower-case names, as HTTP/2 and undici carry them). */
export interface SignedHeaders {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

/**
 * The signature headers of a message. `secrets` holds the current secret first, then the previous
 * one while its rotation grace lasts; each signs.
 */
export function signedHeaders(
  secrets: readonly string[],
  id: string,
  timestampSeconds: number,
  body: string,
): SignedHeaders {
  if (secrets.length === 0) throw new WebhookSecretError('no secret to sign with');
  if (!/^[\x21-\x7e]{1,256}$/.test(id))
    throw new WebhookSecretError('a webhook id is 1-256 printable ASCII characters');
  if (!Number.isSafeInteger(timestampSeconds) || timestampSeconds < 0) {
    throw new WebhookSecretError('a webhook timestamp is whole Unix seconds');
  }
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': secrets.map((s) => signature(s, id, timestampSeconds, body)).join(' '),
  };
}
