import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, expectTypeOf, it } from 'vitest';
import type { Freshness } from '../../db/refresh/index.js';
import type { StaleEstimate } from '../../src/freshness/index.js';

// What the layer rules of .dependency-cruiser.cjs cannot see, because it is text rather than an
// import: the freshness policy reading the clock, SQL written outside db/, and a unit of work
// (a client checked out, a transaction, the pool under a Drizzle handle) handled outside it.

const root = join(import.meta.dirname, '..', '..');

function sources(dir: string): string[] {
  return readdirSync(join(root, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) =>
      relative(root, join(root, dir, f))
        .split('\\')
        .join('/'),
    )
    .sort();
}

/** The code of a file without its comments (a comment may name `Date.now` or quote a statement). */
function code(file: string): string {
  return readFileSync(join(root, file), 'utf8')
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/(^|[^:'"`])\/\/.*$/gm, '$1');
}

// Reading the clock: the policy is handed `now` by whoever runs it (the workers, the simulator).
const CLOCK = /\bDate\.now\s*\(|\bnew Date\s*\(\s*\)|\bperformance\.now\s*\(|\bprocess\.hrtime\b/;

// A statement in a string: a literal that opens with a statement's keyword, a line that does, or
// drizzle's sql`…`.
const SQL =
  /[`'"]\s*(select|insert into|update [a-z_]+ set|delete from|with [a-z_]+ as|begin|commit|rollback|listen|unlisten)\b|\bsql`|^\s*(select|insert into|delete from)\s/im;

// SQL still outside db/, file by file: none is left. A file never joins this list; its statements
// go into db/<concept>/ (the sql-only-in-db rule of .dependency-cruiser.cjs says the same of imports).
const SQL_OUTSIDE_DB_KNOWN: string[] = [];

// The unit of work is db/'s (db/transaction.ts `withClient`, `withTransaction`; db/client.ts
// `poolOf`): above it, no client is checked out of a pool and no handle is reached into.
const UNIT_OF_WORK = /\.connect\s*\(\s*\)|\.\$client\b/;

describe('layers', () => {
  it('the freshness policy reads no clock of its own', () => {
    const reading = sources('src/freshness').filter((f) => CLOCK.test(code(f)));
    expect(reading).toEqual([]);
  });

  it('SQL is written only in db/ (but for the files still listed as known)', () => {
    const writing = [...sources('src'), ...sources('jobs')].filter((f) => SQL.test(code(f)));
    expect(writing.filter((f) => !SQL_OUTSIDE_DB_KNOWN.includes(f))).toEqual([]);
    // A listed file that no longer writes SQL comes off the list.
    expect(SQL_OUTSIDE_DB_KNOWN.filter((f) => !writing.includes(f))).toEqual([]);
  });

  it('the unit of work is in db/: no client checked out, no transaction opened, no $client above it', () => {
    const handling = [...sources('src'), ...sources('jobs'), ...sources('bin')].filter((f) =>
      UNIT_OF_WORK.test(code(f)),
    );
    expect(handling).toEqual([]);
  });

  it("the stored estimate's basis is the policy's estimate less its share", () => {
    // One shape on both sides of the layer line, declared twice because neither side may import the
    // other (db-is-the-bottom, freshness-imports-only-itself): db/refresh/freshness.ts computes in
    // SQL what src/freshness/staleness.ts computes in code. `npm run typecheck` fails if they part.
    expectTypeOf<Freshness['estimate']>().toEqualTypeOf<Omit<StaleEstimate, 'share'>>();
  });

  it('the checks see what they look for', () => {
    expect(UNIT_OF_WORK.test('const client = await pool.connect();')).toBe(true);
    expect(UNIT_OF_WORK.test('readFreshness(deps.db.$client, ms)')).toBe(true);
    expect(UNIT_OF_WORK.test('await redis.connect(opts)')).toBe(false);
    expect(CLOCK.test('const t = Date.now();')).toBe(true);
    expect(CLOCK.test('new Date(ms)')).toBe(false);
    expect(SQL.test("pool.query('select 1')")).toBe(true);
    expect(SQL.test('db.execute(sql`select 1`)')).toBe(true);
  });
});
