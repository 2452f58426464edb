/** The one time format for people; JSON carries ISO 8601 (`toISOString`). */

export type Moment = Date | string | null | undefined;

export function toDate(value: Moment): Date | undefined {
  if (value === null || value === undefined || value === '') return undefined;
  const date = value instanceof Date ? value : new Date(value);
  return Number.isNaN(date.getTime()) ? undefined : date;
}

/**
 * The one way cards-sync writes a moment for people (admin pages, `status`, CLI messages): ISO 8601 in UTC to the second, `2026-11-23 05:17:00Z`.
 * Takes a Date or anything `Date` reads (Postgres `::text` timestamps included); `—` for none, and
 * a value it cannot read is shown as it is.
 */
export function formatTime(value: Moment): string {
  const date = toDate(value);
  if (date === undefined) return value ? String(value) : '—';
  return `${date.toISOString().slice(0, 19).replace('T', ' ')}Z`;
}

const UNITS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** The units a duration takes, for the messages that refuse one. */
export const DURATION_UNITS = 'lower-case s, m, h, d or w';

/**
 * `90s`, `15m`, `36h`, `7d`, `2w`, `1.5d` → milliseconds; undefined if not one. Units are lower
 * case only: `2M` reads as months to some and minutes to others, so it is refused, not guessed.
 */
export function durationMs(raw: string): number | undefined {
  const m = /^(\d{1,6}(?:\.\d{1,3})?)([smhdw])$/.exec(raw.trim());
  if (!m) return undefined;
  return Math.round(Number(m[1]) * UNITS[m[2]!]!);
}

/** Why `raw` is no duration, for the end of a refusal: an upper-case unit, or the units there are. */
export function durationHint(raw: string): string {
  const unit = /^\d{1,6}(?:\.\d{1,3})?([SMHDW])$/.exec(raw.trim())?.[1];
  if (unit === undefined) return `a number and one of ${DURATION_UNITS}`;
  const guess = unit === 'M' ? 'minutes or months?' : `${unit.toLowerCase()}?`;
  return `upper-case ${unit} is refused rather than guessed at (${guess}); units are ${DURATION_UNITS}`;
}

const SPANS: [string, number][] = [
  ['d', 86_400],
  ['h', 3600],
  ['m', 60],
];

/**
 * The one way cards-sync writes a duration for people, in the units `durationMs` reads: a whole
 * unit when the seconds fall on one (`7d`, `36h`, `2m`, `90s`, as REFRESH_MAX_AGE and `--stale`
 * are written); an age that does not, in the largest unit it spans twice, to a tenth (`3.4h`).
 */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  for (const [unit, size] of SPANS) if (s >= size && s % size === 0) return `${s / size}${unit}`;
  for (const [unit, size] of SPANS) if (s >= 2 * size) return `${(s / size).toFixed(1)}${unit}`;
  return `${s}s`;
}
