import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

// What the guides promise, read the way test/contracts/docs.test.ts compares it with the code:
// the columns each relation's entry in docs/analytics.md names, and the metrics in the table of
// docs/monitoring.md. Pure functions of the text, so a planted omission can be shown to fail.

/**
 * The entries of a Markdown list, by the relations each names: a top-level bullet (`- `, its
 * continuation lines indented) documents the relations in backticks before its dash (` — `);
 * the first entry of a relation is its entry.
 */
function listEntries(markdown: string): Map<string, string> {
  const entries = new Map<string, string>();
  const bullets: string[] = [];
  let open = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('- ')) {
      bullets.push(line);
      open = true;
    } else if (open && /^ {2,}\S/.test(line)) bullets[bullets.length - 1] += `\n${line}`;
    else open = false;
  }
  for (const bullet of bullets.filter((b) => b.includes(' — '))) {
    const head = bullet.split(' — ')[0]!;
    for (const [, name] of head.matchAll(/`([a-z_][a-z0-9_]*)`/g)) {
      if (!entries.has(name!)) entries.set(name!, bullet);
    }
  }
  return entries;
}

/**
 * For each relation, the columns its entry does not name in backticks (`` `col` ``, exactly); a
 * relation without an entry misses all of them. Relations with nothing missing are left out.
 */
export function undocumentedColumns(
  markdown: string,
  columns: Readonly<Record<string, readonly string[]>>,
): Record<string, string[]> {
  const entries = listEntries(markdown);
  const missing: Record<string, string[]> = {};
  for (const [relation, cols] of Object.entries(columns)) {
    const entry = entries.get(relation);
    const named = new Set([...(entry ?? '').matchAll(/`([^`]+)`/g)].map((m) => m[1]!));
    const absent = entry === undefined ? [...cols] : cols.filter((c) => !named.has(c));
    if (absent.length > 0) missing[relation] = absent;
  }
  return missing;
}

/** The metric names (or `prefix_*` patterns) in the first cell of a `| metric | type | labels |` table. */
export function documentedMetrics(markdown: string): string[] {
  const lines = markdown.split('\n');
  const names: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (!/^\| metric \|/.test(lines[i]!)) continue;
    // The rows that follow the header and its rule, up to the first line that is not a row.
    for (let j = i + 2; j < lines.length && lines[j]!.startsWith('|'); j++) {
      const cell = lines[j]!.split('|')[1] ?? '';
      names.push(...[...cell.matchAll(/`([a-z_][a-z0-9_]*\*?)`/g)].map((m) => m[1]!));
    }
  }
  return names;
}

/** The registered metric names no documented name or `prefix_*` pattern covers. */
export function undocumentedMetrics(registered: readonly string[], documented: readonly string[]): string[] {
  const covered = (name: string) =>
    documented.some((d) => (d.endsWith('*') ? name.startsWith(d.slice(0, -1)) : d === name));
  return [...new Set(registered)].filter((name) => !covered(name)).sort();
}

/**
 * Metric names given to a prom-client constructor (`name: 'cards_sync_…'`) anywhere in the
 * product's sources (src/, jobs/, db/): a metric registered outside `createMetrics` is found too.
 */
export function metricNamesInSources(root: string): string[] {
  const names: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts')) {
        const source = readFileSync(path, 'utf8');
        for (const [, name] of source.matchAll(/\bname:\s*['"`](cards_sync_[a-z0-9_]+)['"`]/g))
          names.push(name!);
      }
    }
  };
  for (const dir of ['src', 'jobs', 'db']) walk(join(root, dir));
  return names;
}
