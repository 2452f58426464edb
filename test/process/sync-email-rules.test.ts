import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createMockApi, type MockApi } from '../../src/mock-api/server.js';
import { parseEmail, TargetError } from '../../src/sync/parse.js';
import { useAdminApp } from '../support/admin-client.js';
import { API_KEY, CARD_TOKEN_KEYS } from '../support/fixtures.js';
import { useTestDatabase } from '../support/helpers.js';
import { runCli } from '../support/queue-helpers.js';

// `1,subscriber-1@example.com,pro` was taken for an e-mail. One validator (src/sync/targets.ts)
// holds every edge to RFC 5321's Mailbox / RFC 5322's dot-atom addr-spec (with RFC 6531's UTF-8):
// the CLI, files, POST /api/resync and the ops page refuse the same shapes, each with one line.

const database = useTestDatabase();

function refusal(raw: string): string {
  try {
    parseEmail(raw);
  } catch (error) {
    if (error instanceof TargetError) return error.message;
    throw error;
  }
  throw new Error(`accepted: ${JSON.stringify(raw)}`);
}

describe('parseEmail', () => {
  it.each([
    'a@[192.0.2.1]',
    'a@[IPv6:2001:db8::1]',
    'a@[IPv6:::ffff:192.0.2.1]',
    `a@${'d'.repeat(63)}.example`,
    // 36 characters, 63 in its xn-- form.
    `a@${'用户例子广告'.repeat(6)}.example`,
    "!#$%&'*+-/=?^_`{|}~@example.com",
    '#x@y.com',
    'first.middle.last@example.com',
    'a@xn--bcher-kva.example',
    'a@bücher.example',
    '用户@例子.广告',
    // ZWNJ: a joiner Persian and Indic names need, not an invisible trick.
    'ali\u200creza@example.com',
    'x@localhost',
    `${'a'.repeat(242)}@example.com`,
    `${'é'.repeat(121)}@example.com`,
  ])('accepts %s', (email) => {
    expect(parseEmail(email)).toBe(email);
  });

  it.each([
    ['a CSV row', '1,subscriber-1@example.com,pro', /comma/],
    ['a comma-separated list', 'a@example.com,b@example.com', /comma/],
    ['a semicolon-separated list', 'a@example.com;b@example.com', /semicolon/],
    ['angle brackets', '<ada@example.com>', /bare address/],
    ['a display name', 'Ada Lovelace <ada@example.com>', /bare address/],
    ['a quoted local part', '"ada"@example.com', /quot/],
    ['a comment', 'ada(work)@example.com', /parentheses/],
    ['a backslash', 'a\\b@example.com', /not "\\"/],
    ['a colon', 'a:b@example.com', /not ":"/],
    ['square brackets in the name', 'a[b]@example.com', /not "\["/],
    ['a leading dot', '.ada@example.com', /begin or end with a dot/],
    ['a trailing dot', 'ada.@example.com', /begin or end with a dot/],
    ['two dots in a row', 'a..b@example.com', /two dots/],
    ['an underscore in the domain', 'ada@mail_server.example.com', /not "_"/],
    ['a leading hyphen in a label', 'ada@-example.com', /hyphen/],
    ['a trailing hyphen in a label', 'ada@example-.com', /hyphen/],
    ['a 64-character label', `a@${'d'.repeat(64)}.example`, /63/],
    ['an IDN label over 63 in its xn-- form', `a@${'用户例子广告'.repeat(7)}.example`, /63/],
    ['an invalid xn-- label', 'a@xn--zz.example', /international/],
    ['an emoji domain', 'a@\u{1F600}.example', /U\+1F600/],
    ['an IPv4 literal out of range', 'a@[256.0.0.1]', /address literal/],
    ['an IPv6 literal with a zone', 'a@[IPv6:fe80::1%eth0]', /address literal/],
    ['an unknown literal', 'a@[foo:bar]', /address literal/],
    ['a right-to-left override', 'ada\u202e@example.com', /invisible.*U\+202E/],
    ['a zero-width space', 'ada\u200b@example.com', /invisible.*U\+200B/],
    ['a no-break space', 'ada\u00a0@example.com', /spaces/],
    ['255 bytes of UTF-8 in 134 characters', `${'é'.repeat(121)}a@example.com`, /254 bytes/],
  ])('refuses %s', (_what, raw, reason) => {
    expect(refusal(raw)).toMatch(reason);
    expect(refusal(raw)).not.toMatch(/\n/);
  });
});

describe('the CLI', () => {
  let mock: MockApi;
  let env: Record<string, string>;
  beforeAll(async () => {
    mock = createMockApi({ apiKey: API_KEY });
    await mock.start(0);
    env = {
      DATABASE_URL: database.url,
      REDIS_URL: inject('redisUrl'),
      CARDS_API_BASE_URL: mock.url,
      CARDS_API_KEY: API_KEY,
      CARD_TOKEN_KEYS,
    };
  });
  afterAll(() => mock?.stop());

  const snapshot = async () =>
    (
      await database.handle.pool.query(
        `select (select json_agg(s order by subscriber_id) from subscribers s) as subscribers,
                (select count(*)::int from sync_runs) as runs,
                (select count(*)::int from saved_cards) as cards`,
      )
    ).rows[0];

  it('sync --email refuses a CSV row with one line, and what is stored stays as it was', async () => {
    const first = await runCli(['sync', '--email', 'subscriber-7@example.com'], env);
    expect(first.code, first.stderr).toBe(0);
    const before = await snapshot();
    // The mock maps `subscriber-7@…` to subscriber 7: taken as an e-mail, this row would rewrite its address.
    for (const command of ['sync', 'enqueue']) {
      const run = await runCli([command, '--email', 'subscriber-7@example.com,pro'], env);
      expect(run.code, run.stderr).toBe(2);
      expect(run.stdout).toBe('');
      expect(run.stderr).toMatch(
        /^error: option '--email <email(\.\.\.)?>' argument .* an e-mail must not contain a comma/,
      );
    }
    expect(await snapshot()).toEqual(before);
  });
});

describe('the admin server', () => {
  const { q, post, get, send, nothingQueued } = useAdminApp(database);

  it('POST /api/resync refuses each bad item by index and enqueues the good ones', async () => {
    const emails = [
      '1,subscriber-1@example.com,pro',
      'ok@example.com',
      'a:b@example.com',
      'a..b@example.com',
    ];
    const res = await send(
      '/api/resync',
      {},
      { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ emails }) },
    );
    expect(res.status).toBe(400);
    const body = (await res.json()) as { enqueued: number; errors: { index: number; reason: string }[] };
    expect(body.enqueued).toBe(1);
    expect(body.errors.map((e) => [e.index, e.reason])).toEqual([
      [0, expect.stringMatching(/comma/)],
      [2, expect.stringMatching(/not ":"/)],
      [3, expect.stringMatching(/two dots/)],
    ]);
    const jobs = await q.queue.getJobs(['waiting', 'prioritized'], 0, -1, true);
    expect(jobs.map((j) => j.data.target)).toEqual([{ email: 'ok@example.com' }]);
    await q.queue.obliterate({ force: true });
  });

  it('the ops page refuses the same shapes in its re-sync form and its search, enqueueing nothing', async () => {
    for (const email of ['1,subscriber-1@example.com,pro', 'Ada <ada@example.com>', '"ada"@example.com']) {
      const form = await post('/admin/resync-email', { email });
      expect(form.status, email).toBe(400);
      const html = await form.text();
      expect(html).toContain('Not an e-mail');
      expect(html).not.toContain('<ada@');
      const search = await get(`/admin/subscribers?q=${encodeURIComponent(email)}`);
      expect(search.status, email).toBe(400);
    }
    expect(await (await post('/admin/resync-email', { email: 'a@x.com,b@y.com' })).text()).toMatch(/comma/);
    await nothingQueued();
  });
});
