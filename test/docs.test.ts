import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { buildProgram } from '../src/cli.js';
import { CONFIG_VARIABLES } from '../src/config/index.js';
import { SHARED_VARIABLES } from '../src/fleet/shared-settings.js';

// The documentation keeps up with the code (issue 29): every variable the configuration reads,
// every command and every alert is documented, each alert's runbook_url leads to its section, and
// every link between the documents resolves.

const root = resolve(new URL('..', import.meta.url).pathname);
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
});
