import type { Target } from './api/client.js';

/** Why an id or e-mail given by a person or a file was refused (no value echoed beyond 40 chars). */
export class TargetError extends Error {
  override readonly name = 'TargetError';
  readonly code = 'invalid_target';
}

/** A subscriber id: a positive safe integer written in plain digits. */
export function parseSubscriberId(raw: string): number {
  const text = raw.trim();
  if (!/^\d+$/.test(text)) throw new TargetError('a subscriber id must be a positive whole number');
  const id = Number(text);
  if (!Number.isSafeInteger(id))
    throw new TargetError('a subscriber id must not exceed 9007199254740991 (2^53−1)');
  if (id === 0) throw new TargetError('a subscriber id must be positive');
  return id;
}

/** An e-mail: one `@`, something on each side, no spaces or control characters, at most 254 chars. */
export function parseEmail(raw: string): string {
  const text = raw.trim();
  if (text.length > 254) throw new TargetError('an e-mail must be at most 254 characters');
  if (/[\s\p{Cc}]/u.test(text))
    throw new TargetError('an e-mail must not contain spaces or control characters');
  const at = text.lastIndexOf('@');
  if (at <= 0 || at === text.length - 1) throw new TargetError('an e-mail must look like name@domain');
  if (text.indexOf('@') !== at) throw new TargetError('an e-mail must contain exactly one @');
  const domain = text.slice(at + 1);
  if (!/^[^@.]+(\.[^@.]+)*$/.test(domain))
    throw new TargetError('the domain of an e-mail must look like example.com');
  return text;
}

/** A line or argument that is either an id (digits) or an e-mail. */
export function parseTarget(raw: string): Target {
  const text = raw.trim();
  if (text.includes('@')) return { email: parseEmail(text) };
  if (/^[+-]?\d+$/.test(text)) return { subscriberId: parseSubscriberId(text) };
  throw new TargetError('neither a subscriber id (digits) nor an e-mail (name@domain)');
}
