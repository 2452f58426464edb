import { isIPv6 } from 'node:net';
import { domainToASCII, domainToUnicode } from 'node:url';
import type { Target } from '../api/index.js';

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

/** Longest e-mail, in UTF-8 bytes: RFC 5321's 256-octet path less its angle brackets. */
const MAX_EMAIL_BYTES = 254;
/** Longest domain label, in its ASCII (`xn--`) form (RFC 1035). */
const MAX_LABEL_LENGTH = 63;

/** RFC 5322 atext: what an unquoted local part may hold besides dots. */
const ATEXT = "A-Za-z0-9!#$%&'*+\\-/=?^_`{|}~";
/** Non-ASCII is allowed (RFC 6531), but not what no one can see or type: spaces, controls, format characters (bidi overrides, BOM, soft hyphen) other than the joiners ZWNJ and ZWJ some scripts need, lone surrogates. */
const INVISIBLE = /[\s\p{Z}\p{Cc}\p{Cs}]|(?![\u200c\u200d])\p{Cf}/u;
const LOCAL_CHAR = new RegExp(`^[${ATEXT}\\u0080-\\u{10FFFF}]$`, 'u');
/** A domain label: letters, digits, hyphens; non-ASCII letters, marks and digits (IDN U-labels). */
const LABEL = /^[A-Za-z0-9\p{L}\p{M}\p{N}-]+$/u;
const SPACES = 'an e-mail must not contain spaces or control characters';
/** A plain-text note of a character, safe to show: `","`, or its code point when invisible. */
const shown = (ch: string) =>
  /^[\x21-\x7e]$/.test(ch)
    ? `"${ch}"`
    : `U+${ch.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;

function checkAddressLiteral(literal: string): void {
  const inside = literal.slice(1, -1);
  const v4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(inside);
  if (v4?.slice(1).every((n) => Number(n) <= 255)) return;
  const v6 = /^IPv6:([0-9A-Fa-f:.]+)$/i.exec(inside);
  // node:net's isIPv6 also takes a zone (`%eth0`), which the character class above leaves out.
  if (v6 && isIPv6(v6[1]!)) return;
  throw new TargetError('an address literal domain must be [IPv4 address] or [IPv6:address]');
}

function checkDomain(domain: string): void {
  if (domain.startsWith('[') && domain.endsWith(']')) {
    checkAddressLiteral(domain);
    return;
  }
  const labels = domain.split('.');
  if (labels.some((l) => l === ''))
    throw new TargetError('the domain of an e-mail must look like example.com (no empty part between dots)');
  let ascii = 0;
  for (const label of labels) {
    if (!LABEL.test(label)) {
      const bad = [...label].find((ch) => !LABEL.test(ch))!;
      throw new TargetError(
        `the domain of an e-mail may hold letters, digits, hyphens and dots, not ${shown(bad)}`,
      );
    }
    if (label.startsWith('-') || label.endsWith('-'))
      throw new TargetError('a label of an e-mail domain must not begin or end with a hyphen');
    // A non-ASCII label counts in its xn-- form, as DNS holds it; an xn-- label must decode.
    const form = asciiForm(label);
    if (form === '') throw new TargetError('the domain of an e-mail is not a valid international name');
    if (form.length > MAX_LABEL_LENGTH)
      throw new TargetError(
        `a label of an e-mail domain must be at most ${MAX_LABEL_LENGTH} characters (in its xn-- form)`,
      );
    ascii += form.length + 1;
  }
  if (ascii - 1 > 253) throw new TargetError('the domain of an e-mail must be at most 253 characters');
}

/**
 * A label in the form DNS holds it, or '' when it is not a valid international name. An `xn--`
 * label must decode to a name that encodes back to it: Node 24's `domainToASCII` returns an
 * undecodable `xn--` label unchanged (Node 20's returned ''), so the round trip is the check.
 */
function asciiForm(label: string): string {
  if (!/^xn--/i.test(label)) return /^[A-Za-z0-9-]*$/.test(label) ? label : domainToASCII(label);
  const unicode = domainToUnicode(label);
  const decoded = unicode !== '' && unicode.toLowerCase() !== label.toLowerCase();
  return decoded && domainToASCII(unicode) === label.toLowerCase() ? label : '';
}

/**
 * An e-mail as RFC 5321 and RFC 5322 define an addr-spec, with RFC 6531's UTF-8: a dot-atom local
 * part (no quoted strings, no comments), one `@`, a domain of letter-digit-hyphen labels (IDN allowed)
 * or an address literal (`[192.0.2.1]`, `[IPv6:2001:db8::1]`), at most 254 UTF-8 bytes. Surrounding
 * blanks are trimmed; the address is otherwise returned as given. The one rule of every edge.
 */
export function parseEmail(raw: string): string {
  const text = raw.trim();
  if (/\p{Cc}/u.test(text)) throw new TargetError(SPACES);
  // The shapes of a person's or a spreadsheet's text first, each with what to give instead.
  if (/[<>]/.test(text))
    throw new TargetError('an e-mail must be the bare address (name@domain), without a display name or <…>');
  if (text.includes(','))
    throw new TargetError('an e-mail must not contain a comma: give one address, not a list or a CSV row');
  if (text.includes(';'))
    throw new TargetError('an e-mail must not contain a semicolon: give one address, not a list');
  const invisible = INVISIBLE.exec(text)?.[0];
  if (invisible !== undefined)
    throw new TargetError(
      /\s/u.test(invisible)
        ? SPACES
        : `an e-mail must not contain invisible characters (${shown(invisible)})`,
    );
  if (text.includes('"'))
    throw new TargetError('quoted names ("…"@domain) are not accepted: give the address without quotes');
  if (/[()]/.test(text)) throw new TargetError('an e-mail must not contain parentheses (comments)');
  const at = text.lastIndexOf('@');
  if (at <= 0 || at === text.length - 1) throw new TargetError('an e-mail must look like name@domain');
  if (text.indexOf('@') !== at) throw new TargetError('an e-mail must contain exactly one @');
  if (Buffer.byteLength(text, 'utf8') > MAX_EMAIL_BYTES)
    throw new TargetError(
      `an e-mail must be at most ${MAX_EMAIL_BYTES} bytes (RFC 5321; a non-ASCII character takes 2 to 4)`,
    );
  const local = text.slice(0, at);
  const bad = [...local].find((ch) => ch !== '.' && !LOCAL_CHAR.test(ch));
  if (bad !== undefined)
    throw new TargetError(
      `the name before @ may hold letters, digits, dots and !#$%&'*+-/=?^_\`{|}~, not ${shown(bad)}`,
    );
  if (local.startsWith('.') || local.endsWith('.'))
    throw new TargetError('the name before @ must not begin or end with a dot');
  if (local.includes('..')) throw new TargetError('the name before @ must not hold two dots in a row');
  checkDomain(text.slice(at + 1));
  return text;
}

/** A line or argument that is either an id (digits) or an e-mail. */
export function parseTarget(raw: string): Target {
  const text = raw.trim();
  if (text.includes('@')) return { email: parseEmail(text) };
  if (/^[+-]?\d+$/.test(text)) return { subscriberId: parseSubscriberId(text) };
  throw new TargetError('neither a subscriber id (digits) nor an e-mail (name@domain)');
}
