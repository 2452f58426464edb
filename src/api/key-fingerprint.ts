import { createHash } from 'node:crypto';

// Which API key a process holds, told without the key: a fleet paused by a rejected key must be able
// to name the process that holds it, and to tell it from the key the rest of the fleet uses.

/**
 * A short fingerprint of an API key: the first 12 hex digits (48 bits) of a SHA-256 over a fixed
 * label and the key. It tells keys apart and cannot give the key back: a key is a UUID (122 random
 * bits), of which 48 bits of a one-way hash leave some 2^74 candidates each. The label keeps it from
 * matching a plain SHA-256 of the key that some other system may publish.
 */
export function apiKeyFingerprint(apiKey: string): string {
  return createHash('sha256')
    .update('cards-sync api key fingerprint\u0000')
    .update(apiKey)
    .digest('hex')
    .slice(0, 12);
}
