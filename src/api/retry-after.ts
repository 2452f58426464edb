// `Retry-After`, as a 429 of the API and a webhook receiver send it.

/** `Retry-After` as milliseconds: delta-seconds or an HTTP date; 1 s when absent or unreadable. */
export function parseRetryAfter(value: string | string[] | undefined, now = Date.now()): number {
  const raw = Array.isArray(value) ? value[0] : value;
  if (raw === undefined || raw.trim() === '') return 1000;
  const text = raw.trim();
  if (/^\d+$/.test(text)) return Math.min(Number(text), 86_400) * 1000;
  // Only an IMF-fixdate (`Wed, 21 Oct 2015 07:28:00 GMT`) or its obsolete cousins: Date.parse reads
  // junk such as "-1" or "retry 2030" as dates.
  const imf = /^[A-Za-z]{3,9},? +\d{1,2}[ -][A-Za-z]{3}[ -]\d{2,4} \d{2}:\d{2}:\d{2} GMT$/;
  const asctime = /^[A-Za-z]{3} [A-Za-z]{3} +\d{1,2} \d{2}:\d{2}:\d{2} \d{4}$/;
  if (!imf.test(text) && !asctime.test(text)) return 1000;
  const date = Date.parse(asctime.test(text) ? `${text} GMT` : text);
  if (Number.isNaN(date)) return 1000;
  return Math.min(Math.max(date - now, 0), 86_400_000);
}
