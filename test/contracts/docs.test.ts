import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { buildProgram } from '../../src/cli/program.js';
import { CONFIG_VARIABLES, loadConfig } from '../../src/config/index.js';
import { SHARED_VARIABLES, sharedSettings, showSetting } from '../../src/fleet/shared-settings.js';
import { createMetrics } from '../../src/metrics/index.js';
import {
  documentedMetrics,
  metricNamesInSources,
  undocumentedColumns,
  undocumentedMetrics,
} from '../support/doc-contract.js';
import { useTestDatabase } from '../support/helpers.js';

// The documentation keeps up with the code: every variable the configuration reads,
// every command and every alert is documented, each alert's runbook_url leads to its section, and
// every link between the documents resolves. Every column of every table and view of a
// migrated database is named in its entry of the analytics guide, and every metric the code
// registers in the monitoring guide's metrics table (test/support/doc-contract.ts reads both).

const root = resolve(new URL('../..', import.meta.url).pathname);
const documents = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];
const text = (file: string) => readFileSync(join(root, file), 'utf8');
const everything = documents.map(text).join('\n');

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
const slug = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
const database = useTestDatabase();

/** The columns of every table and view of a migrated database, in order (partitions apart). */
async function columnsOfRelations(): Promise<Record<string, string[]>> {
  const { rows } = await database.handle.pool.query<{ table_name: string; column_name: string }>(
    `select table_name, column_name from information_schema.columns
     where table_schema = 'public'
       and table_name not in (select relname from pg_class where relispartition)
     order by table_name, ordinal_position`,
  );
  const columns: Record<string, string[]> = {};
  for (const r of rows) columns[r.table_name] = [...(columns[r.table_name] ?? []), r.column_name];
  return columns;
}

/** Every metric name the code registers: createMetrics's registry, and any other in the sources. */
function registeredMetrics(): string[] {
  const names = createMetrics()
    .registry.getMetricsAsArray()
    .map((m) => m.name);
  return [...names, ...metricNamesInSources(root)];
}

const anchorsOf = (file: string) =>
  new Set(
    text(file)
      .split('\n')
      .filter((l) => /^#{1,6} /.test(l))
      .map((l) => slug(l.replace(/^#+ /, ''))),
  );

describe('the documentation', () => {
  it('documents every variable the configuration reads', () => {
    const missing = (CONFIG_VARIABLES as string[]).filter((name) => !everything.includes(`\`${name}\``));
    expect(missing).toEqual([]);
  });

  it('lists exactly the shared settings the fleet compares (docs/configuration.md)', () => {
    const line = text('docs/configuration.md')
      .split('\n')
      .find((l) => l.startsWith('Shared: '));
    const listed = [...(line ?? '').matchAll(/`([A-Z_]+)`/g)].map((m) => m[1]);
    expect(listed.sort()).toEqual([...SHARED_VARIABLES].sort());
  });

  it('says how a setting without effect is published as the registry holds it: JSON null, shown as none', () => {
    const published = sharedSettings(
      loadConfig({ REFRESH_MODE: 'continuous', REFRESH_BUDGET_PER_SEC: '5', REFRESH_CRON: '0 3 * * *' }),
    );
    expect(published.REFRESH_CRON).toBeNull();
    expect(JSON.parse(JSON.stringify(published)).REFRESH_TZ).toBeNull();
    expect(showSetting(published.REFRESH_CRON)).toBe('none');
    const unwrapped = text('docs/configuration.md').replace(/\s+/g, ' ');
    expect(unwrapped).toContain("JSON `null` where a setting has no effect in the worker's mode");
    expect(unwrapped).toContain('show as `none`');
  });

  it('says what a second pause does to the reason: replaced, the first kept as an earlier one', () => {
    const row = text('docs/commands.md')
      .split('\n')
      .find((l) => l.startsWith('| `cards-sync pause'));
    expect(row).toContain('a second `pause` replaces the reason');
    expect(row).toContain('as an earlier reason');
    expect(row).not.toContain('keeps the first reason');
  });

  it('documents every command', () => {
    const program = buildProgram({ env: {}, out: () => {}, err: () => {} }, { exitCode: 0 });
    const missing = program.commands
      .map((c) => c.name())
      .filter((name) => !everything.includes(`cards-sync ${name}`));
    expect(missing).toEqual([]);
  });

  it('names only real commands and real flags in its code', () => {
    const program = buildProgram({ env: {}, out: () => {}, err: () => {} }, { exitCode: 0 });
    const wrong: string[] = [];
    // Inline code, and the lines of fenced blocks that run it (`cards-sync …`, `npx cards-sync …`).
    const fenced = everything
      .split(/^```.*$/m)
      .filter((_, i) => i % 2 === 1)
      .flatMap((block) =>
        [...block.matchAll(/^\s*(?:npx )?(cards-sync [a-z][^#\n]*)/gm)].map((m) => `\`${m[1]!.trim()}\``),
      );
    const spans = [everything, ...fenced].join('\n');
    for (const [, name, rest = ''] of spans.matchAll(/`cards-sync ([a-z][a-z-]*)([^`\n]*)`/g)) {
      let cmd = program.commands.find((c) => c.name() === name);
      if (!cmd) {
        wrong.push(`cards-sync ${name}`);
        continue;
      }
      const sub = cmd.commands.find((c) => c.name() === /^\s*([a-z-]+)/.exec(rest)?.[1]);
      if (sub) cmd = sub;
      const flags = new Set(cmd.options.flatMap((o) => [o.long, o.short].filter(Boolean)));
      for (const [flag] of rest.matchAll(/--[a-z][a-z-]*/g)) {
        if (!flags.has(flag) && flag !== '--help') wrong.push(`cards-sync ${name}${rest}: ${flag}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it("gives every alert a runbook_url that leads to the alert's section", () => {
    const rules = parse(text('deploy/prometheus/cards-sync-rules.yml')) as {
      groups: { rules: { alert: string; annotations: Record<string, string> }[] }[];
    };
    const alerts = rules.groups.flatMap((g) => g.rules);
    expect(alerts.length).toBeGreaterThan(0);
    const anchors = anchorsOf('docs/runbooks.md');
    for (const rule of alerts) {
      const url = rule.annotations.runbook_url;
      expect(url, rule.alert).toBe(`docs/runbooks.md#${rule.alert.toLowerCase()}`);
      expect(anchors, rule.alert).toContain(rule.alert.toLowerCase());
      // The section names the alert it is for.
      expect(text('docs/runbooks.md')).toContain(`**${rule.alert}:`);
    }
  });

  it('resolves every link between the documents, to the file and to the section', () => {
    const broken: string[] = [];
    for (const file of documents) {
      for (const [, target] of text(file).matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue;
        const [path, anchor] = target!.split('#');
        const resolved = path ? join(dirname(join(root, file)), path) : join(root, file);
        if (!existsSync(resolved)) broken.push(`${file}: ${target} (no such file)`);
        else if (
          anchor &&
          resolved.endsWith('.md') &&
          !anchorsOf(resolved.slice(root.length + 1)).has(anchor)
        )
          broken.push(`${file}: ${target} (no such section)`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('names every column of every table and view, as a migrated database has them, in docs/analytics.md', async () => {
    const columns = await columnsOfRelations();
    const views = await database.handle.pool.query<{ table_name: string }>(
      `select table_name from information_schema.views where table_schema = 'public'`,
    );
    // The reporting views are all there to check.
    expect(views.rows.map((r) => r.table_name)).toEqual(
      expect.arrayContaining([
        'saved_cards_active',
        'subscriber_freshness',
        'subscribers_report',
        'sync_runs_report',
      ]),
    );
    expect(undocumentedColumns(text('docs/analytics.md'), columns)).toEqual({});
  });

  it("names every metric the code registers in docs/monitoring.md's metrics table", () => {
    const registered = registeredMetrics();
    expect(registered).toContain('cards_sync_fleet_processes');
    expect(undocumentedMetrics(registered, documentedMetrics(text('docs/monitoring.md')))).toEqual([]);
  });
});

describe('the checks of columns and metrics against the docs', () => {
  const analytics = text('docs/analytics.md');
  const report = [
    'subscriber_id',
    'last_synced_at',
    'last_success_at',
    'last_status',
    'last_error',
    'consecutive_failures',
    'active_cards',
    'consecutive_not_found',
    'gone_at',
    'change_rate_per_day',
    'next_refresh_at',
    'change_observations',
  ];

  it("find a column missing from a view's entry, and a view without an entry", () => {
    expect(undocumentedColumns(analytics, { subscribers_report: report })).toEqual({});
    // Planted: the entry loses a column (as the guide once said "every column but email" and
    // listed none); a view the guide does not know at all misses every column.
    const entry = /^- `subscribers_report` —[\s\S]*?(?=\n- |\n\n)/m.exec(analytics)![0];
    const planted = analytics.replace(
      entry,
      entry.replace('`change_observations`', 'what it is estimated from'),
    );
    expect(undocumentedColumns(planted, { subscribers_report: report })).toEqual({
      subscribers_report: ['change_observations'],
    });
    expect(undocumentedColumns(analytics, { planted_view: ['a', 'b'] })).toEqual({
      planted_view: ['a', 'b'],
    });
    // A column named in another entry, or in prose, does not count for this one.
    expect(undocumentedColumns(analytics, { subscriber_freshness: ['change_rate_per_day'] })).toEqual({
      subscriber_freshness: ['change_rate_per_day'],
    });
  });

  it('find a metric missing from the table, and rows cut off the table by a blank line', () => {
    const operations = text('docs/monitoring.md');
    const documented = documentedMetrics(operations);
    expect(
      undocumentedMetrics(
        ['cards_sync_fleet_processes', 'cards_sync_nodejs_heap_size_total_bytes'],
        documented,
      ),
    ).toEqual([]);
    const planted = operations.replace(/^\| `cards_sync_fleet_processes` \|.*\n/m, '');
    expect(undocumentedMetrics(['cards_sync_fleet_processes'], documentedMetrics(planted))).toEqual([
      'cards_sync_fleet_processes',
    ]);
    // The table as it was once: a blank line ended it, and the rows after it were not in it.
    const split = operations.replace(/^(\| `cards_sync_refresh_overrun` \|.*\n)/m, '$1\n');
    expect(
      undocumentedMetrics(['cards_sync_workers', 'cards_sync_refresh_overrun'], documentedMetrics(split)),
    ).toEqual(['cards_sync_workers']);
  });

  it('count a metric registered outside createMetrics, in any file of src/, jobs/ or db/', () => {
    const planted = mkdtempSync(join(tmpdir(), 'cards-sync-docs-'));
    try {
      for (const dir of ['src/sub', 'jobs', 'db']) mkdirSync(join(planted, dir), { recursive: true });
      writeFileSync(
        join(planted, 'src/sub/elsewhere.ts'),
        "export const g = new Gauge({ name: 'cards_sync_planted_total', help: 'x' });",
      );
      const names = metricNamesInSources(planted);
      expect(names).toEqual(['cards_sync_planted_total']);
      expect(undocumentedMetrics(names, documentedMetrics(text('docs/monitoring.md')))).toEqual([
        'cards_sync_planted_total',
      ]);
    } finally {
      rmSync(planted, { recursive: true, force: true });
    }
  });
});
