import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { cardsFor } from '../../src/mock-api/data.js';
import { createMockApi, type MockApi } from '../../src/mock-api/server.js';
import { API_KEY, CARD_TOKEN_KEYS, makeCard, ok, testTokens } from '../support/fixtures.js';
import { adminQuery, useTestDatabase, withDatabase } from '../support/helpers.js';

// The CLI as a user runs it: `node bin/cards-sync.js …` in a child process with a minimal env.

const BIN = fileURLToPath(new URL('../../bin/cards-sync.js', import.meta.url));
const HELP_HINT = /^\(run cards-sync( [a-z-]+)? --help for usage\)$/;

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

function baseEnv(): Record<string, string> {
  return { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? tmpdir() };
}

function cli(args: string[], env: Record<string, string>, timeoutMs = 20_000): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => {
      stdout += s;
    });
    child.stderr.setEncoding('utf8').on('data', (s: string) => {
      stderr += s;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

const lines = (text: string) => text.split('\n').filter((l) => l.trim() !== '');

function isJson(line: string): boolean {
  try {
    return typeof JSON.parse(line) === 'object';
  } catch {
    return false;
  }
}

/** What stderr says to a person: every line that is not a pino JSON log line. */
const plainLines = (stderr: string) => lines(stderr).filter((l) => !isJson(l));

/** The one line a failing command writes for a person, with nothing else around it. */
function theMessage(run: Run): string {
  const plain = plainLines(run.stderr);
  expect(plain, `stderr: ${run.stderr}`).toHaveLength(1);
  expect(run.stderr).not.toMatch(/^\s+at /m);
  return plain[0]!;
}

function expectUsageError(run: Run, pattern: RegExp): void {
  expect(run.code, run.stderr).toBe(2);
  expect(run.stdout).toBe('');
  const plain = plainLines(run.stderr).filter((l) => !HELP_HINT.test(l));
  expect(plain, `stderr: ${run.stderr}`).toHaveLength(1);
  expect(plain[0]).toMatch(pattern);
  expect(run.stderr).not.toMatch(/^\s+at /m);
}

function expectNoSecrets(run: Run, secrets: string[]): void {
  for (const secret of secrets) {
    expect(run.stdout).not.toContain(secret);
    expect(run.stderr).not.toContain(secret);
  }
}

const database = useTestDatabase();

// Scripted subscribers; every other id gets the mock's deterministic data (ids divisible by 1000: 404).
const SCRIPTED_ID = 77;
const LOGGED_ID = 78;
const ECHO_KEY_ID = 401;
const scripted = new Map([
  [SCRIPTED_ID, [makeCard(SCRIPTED_ID), makeCard(SCRIPTED_ID, { cardFamily: '', companyId: 12 })]],
  [LOGGED_ID, [makeCard(LOGGED_ID), makeCard(LOGGED_ID), makeCard(LOGGED_ID)]],
]);

let mock: MockApi;
let env: Record<string, string>;

beforeAll(async () => {
  mock = createMockApi({
    apiKey: API_KEY,
    notFoundEvery: 1000,
    override: (lookup, req) => {
      if (lookup.kind !== 'id') return undefined;
      if (lookup.subscriberId === ECHO_KEY_ID) {
        // Some gateways quote the header they refused: the key must still not reach our output.
        return {
          status: 401,
          body: { title: 'Unauthorized', detail: `key refused: ${req.headers.authorization}` },
        };
      }
      const cards = scripted.get(lookup.subscriberId);
      return cards ? ok(cards) : undefined;
    },
  });
  await mock.start(0);
  env = {
    ...baseEnv(),
    DATABASE_URL: database.url,
    CARDS_API_BASE_URL: mock.url,
    CARDS_API_KEY: API_KEY,
    CARD_TOKEN_KEYS,
    CARDS_API_TIMEOUT_MS: '5000',
  };
});
afterAll(async () => {
  await mock?.stop();
});

async function query<T extends pg.QueryResultRow>(sql: string, params: unknown[] = []): Promise<T[]> {
  return (await database.handle.pool.query<T>(sql, params)).rows;
}

describe.concurrent('sync against a working API', () => {
  it('sync --id prints a succeeded line with the counts, exits 0 and stores the cards', async () => {
    const run = await cli(['sync', '--id', String(SCRIPTED_ID)], env);
    expect(run.code, run.stderr).toBe(0);
    expect(lines(run.stdout)).toHaveLength(1);
    expect(run.stdout).toMatch(
      /^succeeded\s+subscriber 77: 2 cards seen; inserted 2, updated 0, unchanged 0, removed 0, restored 0\b/,
    );
    const rows = await query<{ id: string; removed_at: Date | null; card_family: string }>(
      'select id::text, removed_at, card_family from saved_cards where subscriber_id = $1 order by id',
      [SCRIPTED_ID],
    );
    expect(rows.map((r) => Number(r.id))).toEqual(scripted.get(SCRIPTED_ID)!.map((c) => c.id));
    expect(rows.every((r) => r.removed_at === null)).toBe(true);
    const runs = await query<{ status: string; trigger: string }>(
      'select status, trigger from sync_runs where subscriber_id = $1',
      [SCRIPTED_ID],
    );
    expect(runs).toEqual([{ status: 'succeeded', trigger: 'cli' }]);
  });

  it('keeps the outcome on stdout and pino JSON logs on stderr, with no key or card token in either', async () => {
    const cards = scripted.get(LOGGED_ID)!;
    const run = await cli(['sync', '--id', String(LOGGED_ID)], { ...env, LOG_LEVEL: 'trace' });
    expect(run.code, run.stderr).toBe(0);
    expect(lines(run.stdout)).toHaveLength(1);
    expect(run.stdout).toMatch(/^succeeded /);
    const logLines = lines(run.stderr);
    expect(logLines.length).toBeGreaterThan(0);
    for (const line of logLines) {
      expect(isJson(line), `not a JSON log line: ${line}`).toBe(true);
      expect(JSON.parse(line)).toMatchObject({ level: expect.any(Number), msg: expect.any(String) });
    }
    // The tokens really went through this process: they are stored, sealed…
    const stored = await query<{ id: number; card_token: string; card_token_fingerprint: string }>(
      'select id, card_token, card_token_fingerprint from saved_cards where subscriber_id = $1',
      [LOGGED_ID],
    );
    expect(stored.every((r) => r.card_token.startsWith('ct1:test1:'))).toBe(true);
    expect(
      stored
        .map((r) =>
          testTokens.reveal(Number(r.id), { value: r.card_token, fingerprint: r.card_token_fingerprint }),
        )
        .sort(),
    ).toEqual(cards.map((c) => c.cardToken).sort());
    // …and printed nowhere.
    expectNoSecrets(run, [API_KEY, ...cards.map((c) => c.cardToken)]);
  });

  it('sync --email finds the subscriber by e-mail and stores the cards', async () => {
    const email = 'subscriber-4242@example.com';
    const run = await cli(['sync', '--email', email], env);
    expect(run.code, run.stderr).toBe(0);
    const expected = cardsFor(4242);
    expect(run.stdout).toMatch(
      new RegExp(
        `^succeeded\\s+subscriber 4242: ${expected.length} cards? seen; inserted ${expected.length},`,
      ),
    );
    const rows = await query<{ n: number }>(
      'select count(*)::int as n from saved_cards where subscriber_id = 4242',
    );
    expect(rows[0]!.n).toBe(expected.length);
    const [sub] = await query<{ email: string | null }>(
      'select email from subscribers where subscriber_id = 4242',
    );
    expect(sub?.email).toBe(email);
    expectNoSecrets(run, [API_KEY, ...expected.map((c) => c.cardToken)]);
  });

  it('--json prints exactly one parseable JSON line describing the outcome', async () => {
    const run = await cli(['sync', '--id', '4343', '--json'], env);
    expect(run.code, run.stderr).toBe(0);
    expect(lines(run.stdout)).toHaveLength(1);
    const result = JSON.parse(run.stdout) as Record<string, unknown>;
    const expected = cardsFor(4343);
    expect(result).toMatchObject({
      status: 'succeeded',
      subscriberId: 4343,
      syncRunId: expect.any(Number),
      counts: { cardsSeen: expected.length, inserted: expected.length, removed: 0 },
    });
    const runs = await query<{ subscriber_id: string; status: string }>(
      'select subscriber_id::text, status from sync_runs where id = $1',
      [result.syncRunId],
    );
    expect(runs).toEqual([{ subscriber_id: '4343', status: 'succeeded' }]);
    expectNoSecrets(run, [API_KEY, ...expected.map((c) => c.cardToken)]);
  });

  it('a key held in CARDS_API_KEY_FILE (with a trailing newline) is used', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cards-sync-key-'));
    try {
      const file = join(dir, 'api-key');
      await writeFile(file, `${API_KEY}\n`);
      const { CARDS_API_KEY: _key, ...rest } = env;
      const run = await cli(['sync', '--id', '4444'], { ...rest, CARDS_API_KEY_FILE: file });
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toMatch(/^succeeded\s+subscriber 4444:/);
      expectNoSecrets(run, [API_KEY]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe.concurrent('sync when the API says no', () => {
  it('a 404 exits 1, prints not_found and stores no card', async () => {
    const run = await cli(['sync', '--id', '5000'], env);
    expect(run.code, run.stderr).toBe(1);
    expect(lines(run.stdout)).toHaveLength(1);
    expect(run.stdout).toMatch(/^not_found\s+subscriber 5000:/);
    const cards = await query<{ n: number }>(
      'select count(*)::int as n from saved_cards where subscriber_id = 5000',
    );
    expect(cards[0]!.n).toBe(0);
    const runs = await query<{ status: string }>('select status from sync_runs where subscriber_id = 5000');
    expect(runs).toEqual([{ status: 'not_found' }]);
  });

  it('a wrong key exits 1, prints auth_rejected and how to fix it, and never shows the key', async () => {
    const wrongKey = 'a1b2c3d4-0000-4e6b-a1c7-deadbeef0042';
    const run = await cli(['sync', '--id', '4545'], { ...env, CARDS_API_KEY: wrongKey });
    expect(run.code, run.stderr).toBe(1);
    expect(lines(run.stdout)).toHaveLength(1);
    expect(run.stdout).toMatch(/^auth_rejected\b/);
    expect(run.stdout).toMatch(/fix CARDS_API_KEY/);
    expectNoSecrets(run, [wrongKey, API_KEY]);
    const cards = await query<{ n: number }>(
      'select count(*)::int as n from saved_cards where subscriber_id = 4545',
    );
    expect(cards[0]!.n).toBe(0);
  });

  it('an upstream 401 body quoting the Authorization header does not leak the key', async () => {
    const run = await cli(['sync', '--id', String(ECHO_KEY_ID)], { ...env, LOG_LEVEL: 'trace' });
    expect(run.code, run.stderr).toBe(1);
    expect(run.stdout).toMatch(/^auth_rejected\b/);
    expectNoSecrets(run, [API_KEY]);
  });
});

describe.concurrent('usage errors exit 2 with one clear line', () => {
  const cases: { name: string; args: string[]; pattern: RegExp }[] = [
    { name: 'sync without a target', args: ['sync'], pattern: /--id.*--email|--email.*--id/ },
    {
      name: 'both --id and --email',
      args: ['sync', '--id', '1', '--email', 'a@example.com'],
      pattern: /--id.*--email/,
    },
    { name: '--id 0', args: ['sync', '--id', '0'], pattern: /--id.*positive/ },
    { name: '--id -5', args: ['sync', '--id', '-5'], pattern: /--id.*(positive|whole)/ },
    { name: '--id 2^53', args: ['sync', '--id', '9007199254740992'], pattern: /--id.*9007199254740991/ },
    { name: '--id abc', args: ['sync', '--id', 'abc'], pattern: /--id.*whole number/ },
    {
      name: '--email without @',
      args: ['sync', '--email', 'nobody.example.com'],
      pattern: /--email.*name@domain/,
    },
    { name: 'an unknown command', args: ['frobnicate'], pattern: /unknown command 'frobnicate'/ },
    { name: 'an unknown flag', args: ['sync', '--id', '1', '--bogus'], pattern: /unknown option '--bogus'/ },
  ];
  it.for(cases)('$name', async ({ args, pattern }) => {
    const run = await cli(args, env);
    expectUsageError(run, pattern);
    expectNoSecrets(run, [API_KEY]);
  });
});

describe.concurrent('configuration errors exit 2 naming the variable, never echoing a secret', () => {
  it('CARDS_API_TIMEOUT_MS=abc', async ({ expect }) => {
    const run = await cli(['sync', '--id', '1'], { ...env, CARDS_API_TIMEOUT_MS: 'abc' });
    expect(run.code, run.stderr).toBe(2);
    expect(run.stdout).toBe('');
    expect(theMessage(run)).toMatch(/CARDS_API_TIMEOUT_MS/);
    expectNoSecrets(run, [API_KEY]);
  });

  it('CARDS_API_BASE_URL missing', async ({ expect }) => {
    const { CARDS_API_BASE_URL: _url, ...rest } = env;
    const run = await cli(['sync', '--id', '1'], rest);
    expect(run.code, run.stderr).toBe(2);
    expect(run.stdout).toBe('');
    expect(theMessage(run)).toMatch(/CARDS_API_BASE_URL/);
    expectNoSecrets(run, [API_KEY]);
  });

  it('CARDS_API_KEY_FILE naming a missing file', async ({ expect }) => {
    const { CARDS_API_KEY: _key, ...rest } = env;
    const missing = join(tmpdir(), `cards-sync-no-such-key-${randomBytes(4).toString('hex')}`);
    const run = await cli(['sync', '--id', '1'], { ...rest, CARDS_API_KEY_FILE: missing });
    expect(run.code, run.stderr).toBe(2);
    expect(run.stdout).toBe('');
    expect(theMessage(run)).toMatch(/CARDS_API_KEY_FILE/);
  });

  it('CARDS_API_KEY_FILE holding a key with spaces: refused without quoting the file', async ({ expect }) => {
    const dir = await mkdtemp(join(tmpdir(), 'cards-sync-key-'));
    try {
      const file = join(dir, 'api-key');
      const secret = 'sekrit part-one part-two';
      await writeFile(file, secret);
      const { CARDS_API_KEY: _key, ...rest } = env;
      const run = await cli(['sync', '--id', '1'], { ...rest, CARDS_API_KEY_FILE: file });
      expect(run.code, run.stderr).toBe(2);
      expect(theMessage(run)).toMatch(/CARDS_API_KEY_FILE/);
      expectNoSecrets(run, ['sekrit', 'part-one']);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a malformed DATABASE_URL carrying a password', async ({ expect }) => {
    const run = await cli(['sync', '--id', '1'], {
      ...env,
      DATABASE_URL: 'mysql://app:hunter2-pass@db.internal/cards',
    });
    expect(run.code, run.stderr).toBe(2);
    expect(run.stdout).toBe('');
    expect(theMessage(run)).toMatch(/DATABASE_URL/);
    expectNoSecrets(run, ['hunter2-pass', API_KEY]);
  });
});

describe.concurrent('database problems exit 1 with a message that says what to do', () => {
  it('Postgres unreachable: names Postgres and DATABASE_URL, in one line', async () => {
    const run = await cli(['sync', '--id', '4646'], {
      ...env,
      DATABASE_URL: 'postgres://postgres:pg-pass-not-shown@127.0.0.1:1/cards_sync',
    });
    expect(run.code, run.stderr).toBe(1);
    const message = theMessage(run);
    expect(message).toMatch(/Postgres/);
    expect(message).toMatch(/DATABASE_URL/);
    expectNoSecrets(run, ['pg-pass-not-shown', API_KEY]);
    // Postgres is asked first: not one request of the rate-limited API was spent.
    expect(mock.requests.filter((r) => r.path.endsWith('/4646'))).toEqual([]);
  });

  describe('with an empty database (never migrated)', () => {
    const name = `cards_sync_empty_${randomBytes(6).toString('hex')}`;
    beforeAll(() => adminQuery(`create database ${name}`));
    afterAll(() => adminQuery(`drop database if exists ${name} with (force)`));

    it('says the tables are missing and to run `cards-sync migrate`', async () => {
      const url = withDatabase(inject('templateUrl'), name);
      const run = await cli(['sync', '--email', 'subscriber-4747@example.com'], {
        ...env,
        DATABASE_URL: url,
      });
      expect(run.code, run.stderr).toBe(1);
      const message = theMessage(run);
      expect(message).toMatch(/cards-sync migrate/);
      // The SQL and its parameters (here an e-mail) are not for the user's terminal.
      expect(message).not.toMatch(/insert into|select /i);
      expect(run.stderr).not.toContain('subscriber-4747@example.com');
    });
  });

  it('a database that does not exist: says to run `cards-sync migrate`', async () => {
    const url = withDatabase(inject('templateUrl'), `cards_sync_absent_${randomBytes(6).toString('hex')}`);
    const run = await cli(['sync', '--id', '4848'], { ...env, DATABASE_URL: url });
    expect(run.code, run.stderr).toBe(1);
    expect(theMessage(run)).toMatch(/cards-sync migrate/);
  });
});

describe('rough edges', () => {
  it('--version prints the package version and exits 0', async () => {
    const { version } = JSON.parse(
      (await import('node:fs')).readFileSync(new URL('../../package.json', import.meta.url), 'utf8'),
    ) as { version: string };
    const run = await cli(['--version'], baseEnv());
    expect(run.code).toBe(0);
    expect(run.stdout.trim()).toBe(version);
  });

  it("a mistake in a command's options points at that command's help", async () => {
    const run = await cli(['sync', '--idd', '4'], baseEnv());
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('(run cards-sync sync --help for usage)');
    expect(run.stderr).not.toContain('(run cards-sync --help for usage)');
  });
});

describe('mock-api', () => {
  it('starts on the port it was given, prints its URL, serves cards and stops on SIGTERM with 0', async () => {
    const mockKey = 'mock-key-0123456789abcdef';
    const child = spawn(process.execPath, [BIN, 'mock-api', '--port', '0', '--api-key', mockKey], {
      env: baseEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (s: string) => {
      stderr += s;
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.on('close', (code, signal) => resolve({ code, signal })),
    );
    const killer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    try {
      const url = await new Promise<string>((resolve, reject) => {
        child.stdout.setEncoding('utf8').on('data', (s: string) => {
          stdout += s;
          const found = /http:\/\/127\.0\.0\.1:(\d+)/.exec(stdout);
          if (found) resolve(found[0]);
        });
        exited.then(() => reject(new Error(`mock-api exited early: ${stderr}`)));
      });
      expect(Number(new URL(url).port)).toBeGreaterThan(0);
      const res = await fetch(`${url}/api/saved-cards/subscriber/42`, {
        headers: { authorization: `Apikey ${mockKey}` },
      });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual(cardsFor(42));
      const refused = await fetch(`${url}/api/saved-cards/subscriber/42`, {
        headers: { authorization: 'Apikey some-other-key' },
      });
      expect(refused.status).toBe(401);
      child.kill('SIGTERM');
      expect(await exited).toEqual({ code: 0, signal: null });
      expect(stdout + stderr).not.toContain(mockKey);
    } finally {
      clearTimeout(killer);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });
});
