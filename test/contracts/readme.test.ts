import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/program.js';
import { API_KEY, CARD_TOKEN_KEYS, makeCard, ok, useScriptedApi } from '../support/fixtures.js';
import { useCleanups, useTestDatabase } from '../support/helpers.js';
import { runCli } from '../support/queue-helpers.js';

// The README's commands, as written: every `npm run` names a script of package.json,
// every `npx cards-sync` line a real command with real flags, and the "against the real API" steps
// run here as they are, against the mock API and a database of this test's own. The demo and the
// test command run in test/process/demo.test.ts and in CI itself.

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
const shellLines = [...readme.matchAll(/```sh\n([\s\S]*?)```/g)]
  .flatMap((m) => m[1]!.split('\n'))
  .map((l) => l.replace(/\s+#.*$/, '').trim())
  .filter((l) => l !== '' && !l.startsWith('#'));
const scripts = Object.keys(
  (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { scripts: object })
    .scripts,
);
const program = buildProgram({ env: {}, out: () => {}, err: () => {} }, { exitCode: 0 });
/** `npx cards-sync …` lines as argument lists (single quotes as the shell reads them). */
const cliLines = shellLines
  .filter((l) => l.startsWith('npx cards-sync '))
  .map((l) => [...l.slice('npx cards-sync '.length).matchAll(/'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2]!));

const database = useTestDatabase();
const upstream = useScriptedApi();
const cleanups = useCleanups();

describe("the README's commands", () => {
  it('name npm scripts that exist', () => {
    const runs = shellLines.flatMap((l) => [...l.matchAll(/npm run ([\w:-]+)/g)].map((m) => m[1]!));
    expect(runs.length).toBeGreaterThan(5);
    for (const name of runs) expect(scripts, name).toContain(name);
  });

  it('run one test file as it can run: an existing file, after the build its CLI tests need', () => {
    const single = shellLines.filter((l) => l.includes('npx vitest run '));
    expect(single.length).toBeGreaterThan(0);
    for (const line of single) {
      expect(line, line).toMatch(/^npm run build && npx vitest run test\/(?:[\w-]+\/)?[\w.-]+\.test\.ts$/);
      const file = line.split(' ').at(-1)!;
      expect(existsSync(new URL(`../../${file}`, import.meta.url)), file).toBe(true);
    }
  });

  it('name cards-sync commands and flags that exist', () => {
    expect(cliLines.length).toBeGreaterThanOrEqual(3);
    for (const [name, ...args] of cliLines) {
      const cmd = program.commands.find((c) => c.name() === name);
      expect(cmd, `cards-sync ${name}`).toBeDefined();
      const flags = new Set(cmd!.options.flatMap((o) => [o.long, o.short].filter(Boolean)));
      for (const arg of args.filter((a) => a.startsWith('-'))) expect(flags, `${name} ${arg}`).toContain(arg);
    }
  });

  it('"against the real API" runs as written: migrate, then a sync by id and one by e-mail', async () => {
    // The README's files, in a folder of this test's own.
    const dir = mkdtempSync(join(tmpdir(), 'cards-sync-readme-'));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, 'cards_api_key'), API_KEY);
    writeFileSync(join(dir, 'card_token_keys'), CARD_TOKEN_KEYS);
    upstream.script.set('email:ayse.yilmaz@example.com', ok([makeCard(4242)]));
    const env = {
      DATABASE_URL: database.url,
      CARDS_API_BASE_URL: upstream.url,
      CARDS_API_KEY_FILE: join(dir, 'cards_api_key'),
      CARD_TOKEN_KEYS_FILE: join(dir, 'card_token_keys'),
    };
    for (const args of cliLines) {
      const run = await runCli(args, env);
      expect(run.code, `cards-sync ${args.join(' ')}\n${run.stdout}${run.stderr}`).toBe(0);
    }
    expect(cliLines.map((a) => a[0])).toEqual(['migrate', 'sync', 'sync']);
  });
});
