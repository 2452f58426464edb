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
