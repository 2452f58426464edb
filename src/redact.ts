/**
 * Turns an arbitrary upstream body into a short excerpt that is safe for a log line or the
 * `error_message` column: control characters folded, anything shaped like a card number, a card
 * token or the API key replaced.
 */
export function redactExcerpt(body: string, secrets: readonly string[] = [], max = 160): string {
  // Secrets first, over the whole body: cutting first could leave part of one at the edge.
  let text = body;
  for (const secret of secrets) {
    if (secret.length >= 4) text = text.split(secret).join('[redacted]');
  }
  const cut = text.length > max * 4;
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
    .replace(/[\u0000-\u001f\u007f]+/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  return text.length > max ? `${text.slice(0, max)}…` : text;
}
