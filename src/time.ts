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

/** `90s`, `15m`, `36h`, `7d`, `2w`, `1.5d` (units in either case) → milliseconds; undefined if not one. */
export function durationMs(raw: string): number | undefined {
  const m = /^(\d{1,6}(?:\.\d{1,3})?)([smhdw])$/i.exec(raw.trim());
  if (!m) return undefined;
  return Math.round(Number(m[1]) * UNITS[m[2]!.toLowerCase()]!);
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
