import { maskCardNumbers } from './card-number.js';

/**
 * An e-mail address in free text: something@domain.tld. The local part of RFC 5321 may hold most
 * printable characters; what an excerpt must not carry is the address, so the match is generous.
 */
const EMAIL = /[^\s@<>"'`,;:()[\]{}]+@[^\s@<>"'`,;:()[\]{}]+\.[^\s@<>"'`,;:()[\]{}]+/g;

/** How far past the excerpt's end a number or address is still looked for: one cut in two is still found. */
const OVERLAP = 128;

/**
 * Turns an arbitrary upstream body into a short excerpt that is safe for a log line or the
 * `error_message` column: control characters folded, card numbers (Luhn, any separators),
 * e-mail addresses, and anything shaped like a card token or the API key replaced.
 */
export function redactExcerpt(body: string, secrets: readonly string[] = [], max = 160): string {
  // Secrets first, over the whole body: cutting first could leave part of one at the edge.
  let text = body;
  for (const secret of secrets) {
    if (secret.length >= 4) text = text.split(secret).join('[redacted]');
  }
  const cut = text.length > max * 4;
  // Card numbers and addresses before the cut, over a little more than is kept: one the cut
  // would halve is still recognised whole.
  text = maskCardNumbers(text.slice(0, max * 4 + OVERLAP)).replace(EMAIL, '[e-mail]');
  text = text
    .slice(0, max * 4)
    // 12 to 19 digits, possibly grouped by spaces or hyphens: could be a card number.
    .replace(/\d(?:[ -]?\d){11,18}/g, '[number]')
    // A run of digits cut at the edge of the excerpt: drop it rather than show part of a number.
    // Only where something was cut: `connect ECONNREFUSED 127.0.0.1:5432` keeps its port.
    .replace(cut ? /\d[\d -]*$/ : /(?!)/, '')
    // Long hex or base64-ish runs: tokens, keys.
    .replace(/[A-Za-z0-9_+/=-]{24,}/g, '[token]')
    // biome-ignore lint/suspicious/noControlCharactersInRegex: folding control characters is the point
    .replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]+/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  return text.length > max ? `${text.slice(0, max)}…` : text;
}
