import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// How much `cards-sync` loads before it answers `--help`, `--version` or a refused flag: what it
// prints, no more (docs/architecture.md, "Light fronts"). A flag parser reached through a folder's
// whole front file (src/sync/index.ts rather than src/sync/parse.ts) loads the database driver, the
// HTTP client and the config's schema library with it: 648 modules and 0.5 s where 60 take 0.08 s.
// Counted, not timed: a module count does not depend on the machine.

const BIN = fileURLToPath(new URL('../../bin/cards-sync.js', import.meta.url));

/** At most this many of the program's own and its packages' modules (Node's built-ins apart). */
const MODULES_AT_MOST = 80;

/** Packages that do I/O or validate the configuration: none of them is needed to print help. */
const HEAVY = ['drizzle-orm', 'pg', 'undici', 'zod', 'ioredis', 'bullmq', 'pino', '@opentelemetry'];

// Preloaded into the child: records every module Node loads, and prints them as one line at exit.
const COUNTER = `data:text/javascript,${encodeURIComponent(`
import { registerHooks } from 'node:module';
import { writeSync } from 'node:fs';
const seen = [];
registerHooks({ load(url, context, next) { seen.push(url); return next(url, context); } });
process.on('exit', () => writeSync(2, '\\nLOADED ' + JSON.stringify(seen) + '\\n'));
`)}`;

interface Loaded {
  code: number | null;
  stdout: string;
  modules: string[];
}

function loads(args: string[]): Promise<Loaded> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', COUNTER, BIN, ...args], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    child.on('error', reject);
    child.on('close', (code) => {
      const line = stderr.split('\n').find((l) => l.startsWith('LOADED '));
      if (!line) return reject(new Error(`no module list from cards-sync ${args.join(' ')}: ${stderr}`));
      const urls = JSON.parse(line.slice('LOADED '.length)) as string[];
      resolve({ code, stdout, modules: urls.filter((u) => u.startsWith('file:')) });
    });
  });
}

/** The packages among the modules loaded, by name. */
function packagesOf(modules: string[]): Set<string> {
  const names = new Set<string>();
  for (const url of modules) {
    const m = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
    if (m) names.add(m[1]!);
  }
  return names;
}

describe('cards-sync starts like a command-line tool', () => {
  it('prints its help, its version and every command’s help loading at most 80 modules, none of them a driver', async () => {
    const top = await loads(['--help']);
    expect(top.code).toBe(0);
    const commands = [...top.stdout.matchAll(/^ {2}([a-z][a-z-]*)\b/gm)]
      .map((m) => m[1]!)
      .filter((name) => name !== 'help');
    expect(commands).toEqual(expect.arrayContaining(['worker', 'enqueue', 'status', 'webhooks', 'mock-api']));
    const runs: [string[], Loaded][] = [
      [['--help'], top],
      [['--version'], await loads(['--version'])],
    ];
    for (const command of [...commands, 'webhooks add', 'webhooks retry']) {
      const args = [...command.split(' '), '--help'];
      runs.push([args, await loads(args)]);
    }
    for (const [args, run] of runs) {
      expect(run.code, `cards-sync ${args.join(' ')}`).toBe(0);
      const heavy = [...packagesOf(run.modules)].filter((p) =>
        HEAVY.some((h) => p === h || p.startsWith(`${h}/`)),
      );
      expect(heavy, `cards-sync ${args.join(' ')} loads packages it does not need`).toEqual([]);
      expect(run.modules.length, `cards-sync ${args.join(' ')}: modules loaded`).toBeLessThanOrEqual(
        MODULES_AT_MOST,
      );
    }
  });

  it('refuses a bad flag before it loads the configuration or the database', async () => {
    for (const args of [
      ['enqueue', '--id', 'abc'],
      ['changes', '--after', 'not-a-cursor'],
      ['webhooks', 'add', 'ftp://x', '--types', 'card.nothing'],
      ['mock-api', '--faults', 'nope=1'],
    ]) {
      const run = await loads(args);
      expect(run.code, `cards-sync ${args.join(' ')}`).toBe(2);
      expect(
        [...packagesOf(run.modules)].filter((p) => HEAVY.includes(p)),
        args.join(' '),
      ).toEqual([]);
      expect(run.modules.length, args.join(' ')).toBeLessThanOrEqual(MODULES_AT_MOST);
    }
  });

  it('still loads the database driver for a command that runs (the count is of what help loads, not a broken program)', async () => {
    const run = await loads(['status', '--json']);
    expect(packagesOf(run.modules).has('drizzle-orm')).toBe(true);
  });
});
