import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type pg from 'pg';

// Breaking migrations: the record is db/migrations/breaking.json, shipped with the
// release; the database keeps the ones applied in `breaking_migrations`, so that a worker of an
// earlier release, whose files know nothing of a newer one, still learns of it from the database.

/** The tags this release's record marks breaking, in order. */
export function breakingTags(folder: string): string[] {
  const record = JSON.parse(readFileSync(join(folder, 'breaking.json'), 'utf8')) as {
    breaking?: Record<string, string>;
  };
  return Object.keys(record.breaking ?? {}).sort();
}

/** `0010_unchanged_answers_digest` → 10: migrations are ordered by their number. */
function migrationNumber(tag: string): number {
  const n = Number(/^(\d+)_/.exec(tag)?.[1]);
  return Number.isFinite(n) ? n : Number.NaN;
}

/** Whether a process that knows migrations up to `known` is behind `tag`. */
export function behind(known: string, tag: string): boolean {
  return !(migrationNumber(known) >= migrationNumber(tag));
}

type Queryable = Pick<pg.Pool, 'query'> | Pick<pg.Client, 'query'>;

/**
 * The newest breaking migration applied to the database that a release knowing up to `known` does
 * not know; undefined when there is none (or the database predates the record).
 */
export async function breakingAhead(db: Queryable, known: string): Promise<string | undefined> {
  const exists = await db.query<{ ok: boolean }>(
    `select to_regclass('public.breaking_migrations') is not null as ok`,
  );
  if (!exists.rows[0]?.ok) return undefined;
  const { rows } = await db.query<{ tag: string }>('select tag from breaking_migrations');
  return rows
    .map((r) => r.tag)
    .filter((tag) => behind(known, tag))
    .sort((a, b) => migrationNumber(a) - migrationNumber(b))
    .at(-1);
}

/** The line a worker behind the database's newest breaking migration says before it exits 3. */
export function tooOldMessage(version: string, known: string, breaking: string): string {
  return (
    `cards-sync ${version} knows migrations up to ${known}, but the database has breaking migration ` +
    `${breaking}: start the newer release`
  );
}
