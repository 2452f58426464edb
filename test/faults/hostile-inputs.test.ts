import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { csrfToken } from '../../src/admin/csrf.js';
import { type ApiClient, createApiClient } from '../../src/api/client.js';
import { directWriter } from '../../src/sync/group-commit.js';
import { syncSubscriber } from '../../src/sync/sync-subscriber.js';
import { testAdminApp } from '../support/admin-helpers.js';
import { API_KEY, CARD_TOKEN_KEYS, makeCard, ok, testTokens, useScriptedApi } from '../support/fixtures.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';
import { runCli, testQueue } from '../support/queue-helpers.js';
import { recordFaultRow } from './report.js';
import { secretsIn } from './secrets.js';

// Hostile input at every edge: CLI arguments and environment, files of ids, admin HTTP requests
// and API answers. Each gets a clear error, and afterwards the stored data is exactly what it was:
// the same cards, history and subscribers, and nothing new on the queue.

const database = useTestDatabase();
const upstream = useScriptedApi();
const q = testQueue();
const TOKEN = 'hostile-admin-token-0c5e91d2a7';
const READ_TOKEN = 'hostile-read-token-7d3f02b6c1';
const { logger, lines } = captureLogger();
let api: ApiClient;
let admin: ReturnType<typeof testAdminApp>['admin'];
let closeAdmin: () => Promise<void>;
let dir: string;
const outputs: string[] = [];
const seeded = [makeCard(9101), makeCard(9101), makeCard(9102)];

/** Everything a hostile input must leave alone, as one comparable value. */
async function snapshot(): Promise<string> {
  const r = await database.handle.pool.query<{ s: string }>(`
    select concat_ws(' | ',
      (select md5(coalesce(string_agg(c::text, ',' order by id), '')) from saved_cards c),
      (select md5(coalesce(string_agg(h::text, ',' order by id), '')) from saved_card_changes h),
      (select md5(coalesce(string_agg(s::text, ',' order by subscriber_id), '')) from subscribers s)) as s`);
  const counts = await q.queue.getJobCounts('waiting', 'delayed', 'active', 'prioritized');
  return `${r.rows[0]!.s} | queue ${JSON.stringify(counts)}`;
}

beforeAll(async () => {
  api = createApiClient({ baseUrl: upstream.url, apiKey: API_KEY, pathStyle: 'standard', timeoutMs: 2000 });
  ({ admin, close: closeAdmin } = testAdminApp(database, q, {
    logger,
    adminToken: TOKEN,
    adminReadToken: READ_TOKEN,
  }));
  dir = await mkdtemp(join(tmpdir(), 'cards-sync-hostile-'));
  const writer = directWriter(database.handle.db, testTokens);
  for (const id of [9101, 9102]) {
    await writer.apply({
      subscriberId: id,
      cards: seeded.filter((c) => c.subscriberId === id),
      run: { email: null, trigger: 'manual', jobId: null, refreshRunId: null, startedAt: new Date() },
    });
  }
});
afterAll(async () => {
  await api.close();
  await closeAdmin();
  await q.cleanup();
  await rm(dir, { recursive: true, force: true });
});

const env = () => ({
  DATABASE_URL: database.url,
  REDIS_URL: inject('redisUrl'),
  QUEUE_PREFIX: q.prefix,
  CARDS_API_BASE_URL: upstream.url,
  CARDS_API_KEY: API_KEY,
  CARD_TOKEN_KEYS,
  LOG_LEVEL: 'info',
});

interface Case {
  edge: 'cli' | 'env' | 'file' | 'http' | 'api' | 'keys';
  name: string;
  /** Runs the input; returns what the user sees: an exit code or HTTP status, and the message. */
  run(): Promise<{ code: number; message: string }>;
  code: number;
  message: RegExp;
}

async function cli(args: string[], extraEnv: Record<string, string> = {}, input?: string | Buffer) {
  const r = await runCli(args, { ...env(), ...extraEnv }, input);
  outputs.push(r.stderr, r.stdout);
  return { code: r.code ?? -1, message: `${r.stderr}\n${r.stdout}` };
}

async function file(name: string, content: string | Buffer) {
  const path = join(dir, name);
  await writeFile(path, content);
  return cli(['enqueue', '--file', path]);
}

async function http(path: string, init: RequestInit & { token?: string | null } = {}) {
  const headers = new Headers(init.headers);
  if (init.token !== null) headers.set('authorization', `Bearer ${init.token ?? TOKEN}`);
  const res = await admin.app.fetch(new Request(`http://admin.test${path}`, { ...init, headers }));
  const text = await res.text();
  outputs.push(text);
  return { code: res.status, message: text };
}
const resync = (body: string, init: { token?: string | null; type?: string } = {}) =>
  http('/api/resync', {
    method: 'POST',
    body,
    headers: { 'content-type': init.type ?? 'application/json' },
    ...(init.token !== undefined ? { token: init.token } : {}),
  });

let nextId = 9200;
/** An id lookup answered with `body`; the outcome's status and message. */
async function answer(body: unknown, raw = false) {
  const id = nextId++;
  upstream.script.set(`id:${id}`, raw ? { status: 200, body: body as string } : ok(body));
  const r = await syncSubscriber(
    { db: database.handle.db, api, logger, tokens: testTokens },
    { target: { subscriberId: id }, trigger: 'manual' },
  );
  return { code: r.status === 'invalid_response' ? 422 : 200, message: r.errorMessage ?? r.status };
}
const card = (overrides: Record<string, unknown>) => ({ ...makeCard(nextId), ...overrides });

/** Runs `token --card-id` on a seeded card while its stored value is altered by `alter`, then puts it back. */
async function withAlteredToken(alter: (value: string) => string, args: string[] = []) {
  const id = seeded[0]!.id;
  const { rows } = await database.handle.pool.query<{ card_token: string }>(
    'select card_token from saved_cards where id = $1',
    [id],
  );
  const original = rows[0]!.card_token;
  await database.handle.pool.query('update saved_cards set card_token = $2 where id = $1', [
    id,
    alter(original),
  ]);
  try {
    return await cli(['token', '--card-id', String(id), ...args]);
  } finally {
    await database.handle.pool.query('update saved_cards set card_token = $2 where id = $1', [id, original]);
  }
}
const flipLastByte = (value: string) => {
  const [scheme, keyId, body] = value.split(':') as [string, string, string];
  const bytes = Buffer.from(body, 'base64url');
  bytes[bytes.length - 1]! ^= 0x01;
  return `${scheme}:${keyId}:${bytes.toString('base64url')}`;
};
const OTHER_KEY = `other:${Buffer.alloc(32, 7).toString('base64')}`;

const cases: Case[] = [
  // Card-token keys and sealed values
  {
    edge: 'keys',
    name: 'CARD_TOKEN_KEYS without a key id',
    run: () => cli(['sync', '--id', '9101'], { CARD_TOKEN_KEYS: Buffer.alloc(32, 1).toString('base64') }),
    code: 2,
    message: /CARD_TOKEN_KEYS is not a key ring .*no key id before a colon/,
  },
  {
    edge: 'keys',
    name: 'a key of 31 bytes',
    run: () => cli(['worker'], { CARD_TOKEN_KEYS: `k1:${Buffer.alloc(31, 1).toString('base64')}` }),
    code: 2,
    message: /key k1 is 31 bytes; AES-256 needs exactly 32/,
  },
  {
    edge: 'keys',
    name: 'no keys while encryption is on',
    run: () => cli(['sync', '--id', '9101'], { CARD_TOKEN_KEYS: '' }),
    code: 2,
    message: /CARD_TOKEN_KEYS is not set.*openssl rand -base64 32/,
  },
  {
    edge: 'keys',
    name: 'a stored value under a key id the ring does not hold',
    run: () => cli(['token', '--card-id', String(seeded[0]!.id)], { CARD_TOKEN_KEYS: OTHER_KEY }),
    code: 1,
    message: /sealed under key test1, which CARD_TOKEN_KEYS does not hold/,
  },
  {
    edge: 'keys',
    name: 'a dry run against tokens under a key the ring does not hold',
    run: async () => {
      upstream.script.set('id:9101', ok(seeded.filter((c) => c.subscriberId === 9101)));
      try {
        return await cli(['sync', '--id', '9101', '--dry-run'], { CARD_TOKEN_KEYS: OTHER_KEY });
      } finally {
        upstream.script.delete('id:9101');
      }
    },
    code: 1,
    message: /dry run: card \d+: the stored token is sealed under key test1/,
  },
  {
    edge: 'keys',
    name: 'a sealed value whose tag was altered',
    run: () => withAlteredToken(flipLastByte),
    code: 1,
    message: /failed authentication under key test1 .*refusing to decrypt it/,
  },
  {
    edge: 'keys',
    name: 'a sealed value naming an unknown scheme',
    run: () => withAlteredToken((v) => v.replace(/^ct1:/, 'ct9:')),
    code: 1,
    message: /is not a sealed value/,
  },
  // CLI arguments
  { edge: 'cli', name: 'sync without a target', run: () => cli(['sync']), code: 2, message: /--id/ },
  { edge: 'cli', name: 'sync --id abc', run: () => cli(['sync', '--id', 'abc']), code: 2, message: /--id/ },
  { edge: 'cli', name: 'sync --id 0', run: () => cli(['sync', '--id', '0']), code: 2, message: /--id/ },
  { edge: 'cli', name: 'sync --id -5', run: () => cli(['sync', '--id', '-5']), code: 2, message: /--id/ },
  {
    edge: 'cli',
    name: 'sync --id 2^53',
    run: () => cli(['sync', '--id', '9007199254740992']),
    code: 2,
    message: /--id/,
  },
  {
    edge: 'cli',
    name: "sync --id '1; drop table saved_cards'",
    run: () => cli(['sync', '--id', '1; drop table saved_cards']),
    code: 2,
    message: /--id/,
  },
  {
    edge: 'cli',
    name: 'sync --email without @',
    run: () => cli(['sync', '--email', 'nobody']),
    code: 2,
    message: /--email/,
  },
  {
    edge: 'cli',
    name: 'enqueue --id 1e3',
    run: () => cli(['enqueue', '--id', '1e3']),
    code: 2,
    message: /--id/,
  },
  {
    edge: 'cli',
    name: 'refresh --stale 5y',
    run: () => cli(['refresh', '--stale', '5y']),
    code: 2,
    message: /--stale/,
  },
  {
    edge: 'cli',
    name: 'worker --concurrency 0',
    run: () => cli(['worker', '--concurrency', '0']),
    code: 2,
    message: /--concurrency/,
  },
  { edge: 'cli', name: 'an unknown command', run: () => cli(['frobnicate']), code: 2, message: /frobnicate/ },
  // Environment
  {
    edge: 'env',
    name: 'DATABASE_URL not a URL',
    run: () => cli(['sync', '--id', '1'], { DATABASE_URL: 'not a url' }),
    code: 2,
    message: /DATABASE_URL/,
  },
  {
    edge: 'env',
    name: 'REDIS_URL of another scheme',
    run: () => cli(['enqueue', '--id', '1'], { REDIS_URL: 'http://127.0.0.1:6379' }),
    code: 2,
    message: /REDIS_URL/,
  },
  {
    edge: 'env',
    name: 'CARDS_API_BASE_URL ftp://',
    run: () => cli(['sync', '--id', '1'], { CARDS_API_BASE_URL: 'ftp://api.example.com' }),
    code: 2,
    message: /CARDS_API_BASE_URL/,
  },
  {
    edge: 'env',
    name: 'CARDS_API_TIMEOUT_MS=-1',
    run: () => cli(['sync', '--id', '1'], { CARDS_API_TIMEOUT_MS: '-1' }),
    code: 2,
    message: /CARDS_API_TIMEOUT_MS/,
  },
  {
    edge: 'env',
    name: 'SYNC_CONCURRENCY=0',
    run: () => cli(['sync', '--id', '1'], { SYNC_CONCURRENCY: '0' }),
    code: 2,
    message: /SYNC_CONCURRENCY/,
  },
  {
    edge: 'env',
    name: 'CARDS_API_PATH_STYLE=weird',
    run: () => cli(['sync', '--id', '1'], { CARDS_API_PATH_STYLE: 'weird' }),
    code: 2,
    message: /CARDS_API_PATH_STYLE/,
  },
  {
    edge: 'env',
    // Only the worker and `refresh` use the refresh settings: other commands warn and run.
    name: 'REFRESH_CRON of three fields',
    run: () => cli(['worker', '--exit-when-idle'], { REFRESH_CRON: '* * *' }),
    code: 2,
    message: /REFRESH_CRON/,
  },
  {
    edge: 'env',
    name: 'DATABASE_TIMEOUT_MS=30s',
    run: () => cli(['worker', '--exit-when-idle'], { DATABASE_TIMEOUT_MS: '30s' }),
    code: 2,
    message: /DATABASE_TIMEOUT_MS/,
  },
  {
    edge: 'env',
    name: 'CARDS_API_KEY and CARDS_API_KEY_FILE both set',
    run: () => cli(['sync', '--id', '1'], { CARDS_API_KEY_FILE: '/etc/hostname' }),
    code: 2,
    message: /CARDS_API_KEY/,
  },
  // Files of ids (every line bad: nothing may be enqueued)
  {
    edge: 'file',
    name: 'binary garbage',
    run: () => file('garbage.bin', Buffer.from([0, 255, 1, 10, 254, 0, 7, 10, 128, 129])),
    code: 1,
    message: /rejected [1-9]/,
  },
  {
    edge: 'file',
    name: 'a 1 MB line',
    run: () => file('long.txt', `${'9'.repeat(1_048_576)}\n`),
    code: 1,
    message: /rejected 1/,
  },
  {
    edge: 'file',
    name: 'numbers past 2^53, CRLF and a BOM',
    run: () => file('big.txt', '\ufeff9007199254740992\r\n99999999999999999999\r\n'),
    code: 1,
    message: /rejected 2/,
  },
  {
    edge: 'file',
    name: 'SQL in a line',
    run: () => file('sql.txt', "1; drop table saved_cards\n' or 1=1 --\n"),
    code: 1,
    message: /rejected 2/,
  },
  {
    edge: 'file',
    name: 'a directory as the file',
    run: () => cli(['enqueue', '--file', dir]),
    code: 2,
    message: /--file/,
  },
  // Admin HTTP
  {
    edge: 'http',
    name: 'resync without a token',
    run: () => resync('{"subscriberIds":[1]}', { token: null }),
    code: 401,
    message: /error/,
  },
  {
    edge: 'http',
    name: 'resync with a wrong token',
    run: () => resync('{"subscriberIds":[1]}', { token: 'nope-nope-nope-nope' }),
    code: 401,
    message: /error/,
  },
  // The read token on every write route: it may look, never act.
  ...(
    [
      ['POST', '/api/resync', 'application/json', '{"subscriberIds":[9101]}'],
      ['POST', '/admin/subscribers/9101/resync', 'application/x-www-form-urlencoded', 'x=1'],
      ['POST', '/admin/resync-email', 'application/x-www-form-urlencoded', 'email=a%40example.com'],
      ['POST', '/admin/pause', 'application/x-www-form-urlencoded', 'reason=read+token'],
      ['POST', '/admin/resume', 'application/x-www-form-urlencoded', 'x=1'],
      ['PUT', '/admin/queues/api/queues/saved-cards-sync/retry/failed', 'application/json', '{}'],
      ['PUT', '/admin/queues/api/queues/saved-cards-sync/pause', 'application/json', '{}'],
    ] as const
  ).map(
    ([method, path, type, body]): Case => ({
      edge: 'http',
      name: `the read token on ${method} ${path}`,
      run: () => http(path, { method, body, headers: { 'content-type': type }, token: READ_TOKEN }),
      code: 403,
      message: /the read token may look but not act; use ADMIN_TOKEN/,
    }),
  ),
  // CSRF on the ops page's forms: the operator's token alone does not make a form count.
  {
    edge: 'http',
    name: 'a pause form without _csrf',
    run: () =>
      http('/admin/pause', {
        method: 'POST',
        body: 'reason=csrf',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      }),
    code: 403,
    message: /no valid _csrf field/,
  },
  {
    edge: 'http',
    name: 'a re-sync form posted from another site',
    run: () =>
      http('/admin/subscribers/9101/resync', {
        method: 'POST',
        body: `_csrf=${encodeURIComponent(csrfToken(TOKEN))}`,
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'https://evil.example' },
      }),
    code: 403,
    message: /sent from another origin/,
  },
  {
    edge: 'http',
    name: "a pause form carrying the read token's _csrf",
    run: () =>
      http('/admin/pause', {
        method: 'POST',
        body: `reason=csrf&_csrf=${encodeURIComponent(csrfToken(READ_TOKEN))}`,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      }),
    code: 403,
    message: /no valid _csrf field/,
  },
  {
    edge: 'http',
    name: 'malformed JSON',
    run: () => resync('{"subscriberIds":[1,'),
    code: 400,
    message: /JSON/i,
  },
  {
    edge: 'http',
    name: 'wrong content type',
    run: () => resync('subscriberIds=1', { type: 'application/x-www-form-urlencoded' }),
    code: 415,
    message: /json/i,
  },
  {
    edge: 'http',
    name: 'a 300 KB body',
    run: () => resync(JSON.stringify({ subscriberIds: Array.from({ length: 60_000 }, (_, i) => i + 1) })),
    code: 413,
    message: /error/,
  },
  {
    edge: 'http',
    name: 'SQL in a subscriber id',
    run: () => resync('{"subscriberIds":["1 OR 1=1"]}'),
    code: 400,
    message: /subscriberIds/,
  },
  {
    edge: 'http',
    name: 'SQL in an e-mail',
    run: () => resync(`{"emails":["x'; drop table subscribers; --"]}`),
    code: 400,
    message: /emails/,
  },
  {
    edge: 'http',
    name: 'an id past 2^53',
    run: () => resync('{"subscriberIds":[9007199254740993]}'),
    code: 400,
    message: /subscriberIds/,
  },
  {
    edge: 'http',
    name: 'subscriber route with letters',
    run: () => http('/api/subscribers/abc'),
    code: 400,
    message: /error/,
  },
  {
    edge: 'http',
    name: 'a JSON array as the body',
    run: () => resync('[1,2,3]'),
    code: 400,
    message: /error/,
  },
  // API answers: refused whole, nothing written
  { edge: 'api', name: 'not JSON', run: () => answer('<html>oops</html>', true), code: 422, message: /JSON/ },
  {
    edge: 'api',
    name: 'an object, not an array',
    run: () => answer({ cards: [] }),
    code: 422,
    message: /array/,
  },
  {
    edge: 'api',
    name: 'a record without cardToken',
    run: () => answer([card({ cardToken: undefined })]),
    code: 422,
    message: /cardToken/,
  },
  {
    edge: 'api',
    name: 'an empty cardToken',
    run: () => answer([card({ cardToken: '' })]),
    code: 422,
    message: /cardToken/,
  },
  {
    edge: 'api',
    name: 'a full card number in binNumber',
    run: () => answer([card({ binNumber: '4761123412340043' })]),
    code: 422,
    message: /binNumber/,
  },
  {
    edge: 'api',
    name: 'an unmasked dashed card number',
    run: () => answer([card({ binNumber: '4761-1234-1234-0043' })]),
    code: 422,
    message: /binNumber/,
  },
  {
    edge: 'api',
    name: 'duplicate ids',
    run: () => answer([card({ id: 77 }), card({ id: 77 })]),
    code: 422,
    message: /id/,
  },
  {
    edge: 'api',
    name: "another subscriber's cards",
    run: () => answer([card({ subscriberId: 1 })]),
    code: 422,
    message: /subscriberId/,
  },
  {
    edge: 'api',
    name: 'an id past 2^53',
    run: () => answer('[{"id":9007199254740993}]', true),
    code: 422,
    message: /id/,
  },
  {
    edge: 'api',
    name: 'createDate without an offset',
    run: () => answer([card({ createDate: '2021-02-28T14:01:35' })]),
    code: 422,
    message: /createDate/,
  },
  {
    edge: 'api',
    name: 'a NUL in cardBankName',
    run: () => answer([card({ cardBankName: 'AK\u0000BA' })]),
    code: 422,
    message: /cardBankName/,
  },
  {
    edge: 'api',
    name: 'a body over 10 MB',
    run: () => answer(`[${' '.repeat(10 * 1024 * 1024 + 10)}]`, true),
    code: 422,
    message: /10485760|bytes/,
  },
];

describe('hostile inputs: a clear error, and stored data left intact', () => {
  it('there are at least 40 cases, at every edge', () => {
    expect(cases.length).toBeGreaterThanOrEqual(40);
    expect(new Set(cases.map((c) => c.edge))).toEqual(new Set(['cli', 'env', 'file', 'http', 'api', 'keys']));
  });

  it.for(cases)('$edge: $name', async (c) => {
    const before = await snapshot();
    const got = await c.run();
    expect(got.code, got.message.slice(0, 500)).toBe(c.code);
    expect(got.message).toMatch(c.message);
    expect(await snapshot()).toBe(before);
  });

  it('left the seeded cards as they were, and no secret in any output or log line', async () => {
    const rows = await database.handle.pool.query('select id from saved_cards order by id');
    expect(rows.rows.map((r) => Number(r.id))).toEqual(seeded.map((c) => c.id).sort((a, b) => a - b));
    const tokens = new Set(seeded.map((c) => c.cardToken));
    expect(
      secretsIn([...outputs, lines.join('\n')], {
        apiKey: API_KEY,
        adminToken: TOKEN,
        otherSecrets: [READ_TOKEN],
        cardTokens: tokens,
      }),
    ).toEqual([]);
    recordFaultRow({
      scenario: 'hostile inputs',
      faults: `${cases.length} hostile inputs (CLI, env, files, admin HTTP, API answers, token keys)`,
      faultCount: cases.length,
      jobs: 0,
      subscribersChecked: 2,
      lost: 0,
      duplicated: 0,
    });
  });
});
