import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { savedCardChanges, savedCards, subscribers, syncRuns } from '../../db/schema/index.js';
import { type ApiClient, createApiClient } from '../../src/api/index.js';
import { syncSubscriber } from '../../src/sync/index.js';
import { API_KEY, makeCard, ok, testTokens, useScriptedApi } from '../support/fixtures.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';

const database = useTestDatabase();
const upstream = useScriptedApi();
let api: ApiClient;
const { logger, lines } = captureLogger();

beforeAll(() => {
  api = createApiClient({ baseUrl: upstream.url, apiKey: API_KEY, pathStyle: 'standard', timeoutMs: 2000 });
});
afterAll(async () => {
  await api.close();
});

const sync = (target: { subscriberId: number } | { email: string }) =>
  syncSubscriber({ db: database.handle.db, api, logger, tokens: testTokens }, { target, trigger: 'manual' });

async function cardsOf(subscriberId: number) {
  return database.handle.db
    .select()
    .from(savedCards)
    .where(eq(savedCards.subscriberId, subscriberId))
    .orderBy(savedCards.id);
}
async function changesOf(subscriberId: number) {
  return database.handle.db
    .select()
    .from(savedCardChanges)
    .where(eq(savedCardChanges.subscriberId, subscriberId))
    .orderBy(savedCardChanges.id);
}
async function runsOf(subscriberId: number) {
  return database.handle.db
    .select()
    .from(syncRuns)
    .where(eq(syncRuns.subscriberId, subscriberId))
    .orderBy(syncRuns.id);
}

describe('200 with a valid array', () => {
  it('inserts every card, records the run and the subscriber', async () => {
    const cards = [makeCard(101), makeCard(101, { cardFamily: '', companyId: 77 })];
    upstream.script.set('id:101', ok(cards));
    const result = await sync({ subscriberId: 101 });
    expect(result).toMatchObject({
      status: 'succeeded',
      subscriberId: 101,
      counts: { cardsSeen: 2, inserted: 2 },
    });
    const rows = await cardsOf(101);
    expect(rows.map((r) => r.id)).toEqual(cards.map((c) => c.id));
    expect(rows[1]).toMatchObject({
      cardFamily: '',
      companyId: 77,
      cardBankCode: 100100000,
      removedAt: null,
    });
    expect(rows[0]!.createDate.toISOString()).toBe('2021-02-28T11:01:35.000Z');
    const [run] = await runsOf(101);
    expect(run).toMatchObject({
      status: 'succeeded',
      trigger: 'manual',
      cardsSeen: 2,
      inserted: 2,
      errorCode: null,
    });
    const [sub] = await database.handle.db
      .select()
      .from(subscribers)
      .where(eq(subscribers.subscriberId, 101));
    expect(sub).toMatchObject({ lastStatus: 'succeeded', activeCards: 2, consecutiveFailures: 0 });
    expect((await changesOf(101)).map((c) => c.change)).toEqual(['added', 'added']);
  });

  it('is idempotent: the same answer twice changes no content and writes no history', async () => {
    const cards = [makeCard(102), makeCard(102), makeCard(102)];
    upstream.script.set('id:102', ok(cards));
    await sync({ subscriberId: 102 });
    const before = await cardsOf(102);
    const again = await sync({ subscriberId: 102 });
    expect(again.counts).toMatchObject({
      cardsSeen: 3,
      inserted: 0,
      updated: 0,
      unchanged: 3,
      removed: 0,
      restored: 0,
    });
    const after = await cardsOf(102);
    for (const [i, row] of after.entries()) {
      const { lastSeenAt: _a, ...rest } = row;
      const { lastSeenAt: _b, ...was } = before[i]!;
      expect(rest).toEqual(was);
      expect(row.lastSeenAt.getTime()).toBeGreaterThanOrEqual(before[i]!.lastSeenAt.getTime());
    }
    expect((await changesOf(102)).length).toBe(3);
    const [run] = (await runsOf(102)).slice(-1);
    expect(run).toMatchObject({ inserted: 0, updated: 0, unchanged: 3 });
  });

  it('updates changed cards, naming the changed columns', async () => {
    const card = makeCard(103);
    upstream.script.set('id:103', ok([card]));
    await sync({ subscriberId: 103 });
    const [before] = await cardsOf(103);
    upstream.script.set('id:103', ok([{ ...card, cardBankName: 'GARANTI', cardToken: 'f'.repeat(32) }]));
    const result = await sync({ subscriberId: 103 });
    expect(result.counts).toMatchObject({ updated: 1, unchanged: 0 });
    const [after] = await cardsOf(103);
    expect(after).toMatchObject({ cardBankName: 'GARANTI' });
    expect(
      testTokens.reveal(after!.id, { value: after!.cardToken, fingerprint: after!.cardTokenFingerprint }),
    ).toBe('f'.repeat(32));
    expect(after!.updatedAt.getTime()).toBeGreaterThan(before!.updatedAt.getTime());
    expect(after!.firstSeenAt).toEqual(before!.firstSeenAt);
    const changes = await changesOf(103);
    expect(changes.at(-1)).toMatchObject({
      change: 'updated',
      changedFields: ['card_token', 'card_bank_name'],
      // The earlier values; of the token only that it changed.
      previous: { card_token: 'changed', card_bank_name: 'AKBA' },
      reason: null,
    });
    expect(changes.at(-1)!.syncRunId).toBe(result.syncRunId);
  });

  it('marks vanished cards removed and restores them when they come back', async () => {
    const [a, b] = [makeCard(104), makeCard(104)];
    upstream.script.set('id:104', ok([a, b]));
    await sync({ subscriberId: 104 });
    upstream.script.set('id:104', ok([a]));
    const removal = await sync({ subscriberId: 104 });
    expect(removal.counts).toMatchObject({ removed: 1, unchanged: 1 });
    let rows = await cardsOf(104);
    expect(rows.find((r) => r.id === b.id)!.removedAt).not.toBeNull();
    expect(rows.find((r) => r.id === a.id)!.removedAt).toBeNull();
    upstream.script.set('id:104', ok([a, { ...b, cardFamily: 'World' }]));
    const restore = await sync({ subscriberId: 104 });
    expect(restore.counts).toMatchObject({ restored: 1, unchanged: 1, removed: 0 });
    rows = await cardsOf(104);
    expect(rows.every((r) => r.removedAt === null)).toBe(true);
    const history = await changesOf(104);
    const changes = history.map((c) => [c.cardId, c.change, c.changedFields]);
    expect(changes).toEqual([
      [a.id, 'added', null],
      [b.id, 'added', null],
      [b.id, 'removed', null],
      [b.id, 'restored', ['card_family']],
    ]);
    // A restore keeps the removal it ends and the earlier values of what changed with it.
    const removedAt = history[2]!.changedAt.toISOString();
    expect(history[3]!.previous).toEqual({ card_family: 'Bonus', removed_at: removedAt });
    expect(history.map((h) => h.previous).slice(0, 3)).toEqual([null, null, null]);
    const [sub] = await database.handle.db
      .select()
      .from(subscribers)
      .where(eq(subscribers.subscriberId, 104));
    expect(sub!.activeCards).toBe(2);
  });
});

describe('200 with []', () => {
  it('marks every active card of the subscriber removed', async () => {
    upstream.script.set('id:105', ok([makeCard(105), makeCard(105)]));
    await sync({ subscriberId: 105 });
    upstream.script.set('id:105', ok([]));
    const result = await sync({ subscriberId: 105 });
    expect(result).toMatchObject({ status: 'succeeded', counts: { cardsSeen: 0, removed: 2 } });
    expect((await cardsOf(105)).every((r) => r.removedAt !== null)).toBe(true);
    const [sub] = await database.handle.db
      .select()
      .from(subscribers)
      .where(eq(subscribers.subscriberId, 105));
    expect(sub!.activeCards).toBe(0);
  });

  it('records a run and creates nothing for an e-mail nobody knows', async () => {
    upstream.script.set('email:nobody@example.com', ok([]));
    const result = await sync({ email: 'nobody@example.com' });
    expect(result).toMatchObject({ status: 'succeeded', subscriberId: null });
    const rows = await database.handle.db.select().from(syncRuns).where(eq(syncRuns.id, result.syncRunId));
    expect(rows[0]).toMatchObject({ email: 'nobody@example.com', subscriberId: null, status: 'succeeded' });
  });

  it('empties the subscriber an e-mail was learned from', async () => {
    upstream.script.set('email:Known.Person@example.com', ok([makeCard(106)]));
    await sync({ email: 'Known.Person@example.com' });
    upstream.script.set('email:known.person@example.com', ok([]));
    const result = await sync({ email: 'known.person@example.com' });
    expect(result).toMatchObject({ subscriberId: 106, counts: { removed: 1 } });
  });
});

describe('an e-mail', () => {
  it('belongs to the subscriber whose cards it last answered with: the old owner forgets it', async () => {
    const emailOf = async (id: number) =>
      (await database.handle.db.select().from(subscribers).where(eq(subscribers.subscriberId, id)))[0]?.email;
    upstream.script.set('email:moving@example.com', ok([makeCard(131)]));
    await sync({ email: 'moving@example.com' });
    expect(await emailOf(131)).toBe('moving@example.com');
    // The address now answers with another subscriber's cards, spelled differently.
    upstream.script.set('email:Moving@Example.com', ok([makeCard(132)]));
    await sync({ email: 'Moving@Example.com' });
    expect(await emailOf(131)).toBeNull();
    expect(await emailOf(132)).toBe('Moving@Example.com');
    // Learned again by the first: the second forgets it.
    upstream.script.set('email:moving@example.com', ok([makeCard(131)]));
    await sync({ email: 'moving@example.com' });
    expect([await emailOf(131), await emailOf(132)]).toEqual(['moving@example.com', null]);
  });
});

describe('failures', () => {
  it('404: records not_found, changes no card, not retryable', async () => {
    upstream.script.set('id:107', ok([makeCard(107)]));
    await sync({ subscriberId: 107 });
    const before = await cardsOf(107);
    upstream.script.set('id:107', { status: 404, body: { title: 'Not Found' } });
    const result = await sync({ subscriberId: 107 });
    expect(result).toMatchObject({ status: 'not_found', errorCode: 'not_found', retryable: false });
    expect(await cardsOf(107)).toEqual(before);
    const [sub] = await database.handle.db
      .select()
      .from(subscribers)
      .where(eq(subscribers.subscriberId, 107));
    expect(sub).toMatchObject({ lastStatus: 'not_found', consecutiveFailures: 1, activeCards: 1 });
  });

  it.each([
    [401, 'auth_rejected', false],
    [403, 'auth_rejected', false],
    [500, 'failed', true],
    [503, 'failed', true],
    [400, 'failed', false],
    [409, 'failed', false],
  ] as const)('HTTP %i → %s (retryable %s), no card written', async (status, expected, retryable) => {
    const id = 2000 + status;
    upstream.script.set(`id:${id}`, {
      status,
      body: '<html>oops</html>',
      headers: { 'content-type': 'text/html' },
    });
    const result = await sync({ subscriberId: id });
    expect(result).toMatchObject({ status: expected, retryable });
    expect(await cardsOf(id)).toEqual([]);
    const [run] = await runsOf(id);
    expect(run).toMatchObject({ status: expected, errorCode: status >= 500 ? 'http_5xx' : `http_${status}` });
  });

  it('429: rate_limited with the Retry-After delay, in seconds or as a date', async () => {
    upstream.script.set('id:108', { status: 429, headers: { 'retry-after': '7' } });
    expect(await sync({ subscriberId: 108 })).toMatchObject({
      status: 'rate_limited',
      retryAfterMs: 7000,
      retryable: true,
    });
    const when = new Date(Date.now() + 30_000).toUTCString();
    upstream.script.set('id:108', { status: 429, headers: { 'retry-after': when } });
    const dated = await sync({ subscriberId: 108 });
    expect(dated.retryAfterMs).toBeGreaterThan(25_000);
    expect(dated.retryAfterMs).toBeLessThanOrEqual(30_000);
    upstream.script.set('id:108', { status: 429 });
    expect((await sync({ subscriberId: 108 })).retryAfterMs).toBe(1000);
  });

  it('timeout and connection reset are transient failures', async () => {
    const slow = createApiClient({
      baseUrl: upstream.url,
      apiKey: API_KEY,
      pathStyle: 'standard',
      timeoutMs: 200,
    });
    upstream.script.set('id:109', { ...ok([makeCard(109)]), delayMs: 1000 });
    const started = Date.now();
    const timedOut = await syncSubscriber(
      { db: database.handle.db, api: slow, logger, tokens: testTokens },
      { target: { subscriberId: 109 }, trigger: 'manual' },
    );
    expect(Date.now() - started).toBeLessThan(900);
    expect(timedOut).toMatchObject({ status: 'failed', errorCode: 'timeout', retryable: true });
    await slow.close();
    upstream.script.set('id:109', { status: 200, reset: true });
    expect(await sync({ subscriberId: 109 })).toMatchObject({
      status: 'failed',
      errorCode: 'connection',
      retryable: true,
    });
    expect(await cardsOf(109)).toEqual([]);
  });

  it('refused answers write nothing and name index and field, never the value', async () => {
    const good = makeCard(110);
    upstream.script.set('id:110', ok([good]));
    await sync({ subscriberId: 110 });
    const before = await cardsOf(110);
    const cases: [unknown, RegExp][] = [
      ['not json at all', /not valid JSON/],
      [{ cards: [] }, /JSON array/],
      [
        [good, { ...good, binNumber: '4761123412340043' }],
        /record 1: field "binNumber" looks like a full card number/,
      ],
      [[{ ...good, cardToken: '' }], /record 0: field "cardToken"/],
      [[{ ...good, id: 2 ** 53 }], /record 0: field "id"/],
      [[good, { ...good }], /record 1: field "id" repeats/],
      [[makeCard(999)], /record 0: field "subscriberId" names another subscriber/],
      [[{ ...good, createDate: '2021-02-28 14:01:35' }], /record 0: field "createDate"/],
    ];
    for (const [body, message] of cases) {
      upstream.script.set('id:110', typeof body === 'string' ? { status: 200, body } : ok(body));
      const result = await sync({ subscriberId: 110 });
      expect(result.status).toBe('invalid_response');
      expect(result.errorMessage).toMatch(message);
      expect(result.errorMessage).not.toContain('4761123412340043');
      expect(result.retryable).toBe(false);
    }
    expect(await cardsOf(110)).toEqual(before);
    expect((await changesOf(110)).length).toBe(1);
  });

  it('a body over 10 MB is refused without being kept', async () => {
    const huge = `[${' '.repeat(11 * 1024 * 1024)}]`;
    upstream.script.set('id:111', { status: 200, body: huge });
    const result = await sync({ subscriberId: 111 });
    expect(result).toMatchObject({ status: 'invalid_response' });
    expect(result.errorMessage).toMatch(/over 10485760 bytes/);
  });
});

describe('edges of identity', () => {
  it('handles subscriber and card ids at 2^53−1', async () => {
    const max = Number.MAX_SAFE_INTEGER;
    upstream.script.set(`id:${max}`, ok([makeCard(max, { id: max, cardBankCode: max, companyId: -max })]));
    const result = await sync({ subscriberId: max });
    expect(result).toMatchObject({ status: 'succeeded', subscriberId: max });
    const [row] = await cardsOf(max);
    expect(row).toMatchObject({ id: max, subscriberId: max, cardBankCode: max, companyId: -max });
  });

  it.each([
    'plus+tag@example.com',
    'slash/part@example.com',
    'per%cent@example.com',
    "o'brien@example.com",
    'şükrü.öztürk@örnek.com.tr',
    'space in?#@example.com',
  ])('looks up %s as one encoded path segment', async (email) => {
    upstream.script.set(`email:${email}`, ok([makeCard(120)]));
    const result = await sync({ email });
    expect(result).toMatchObject({ status: 'succeeded', subscriberId: 120 });
    const last = upstream.mock.requests.at(-1)!;
    expect(last.path).toBe(`/api/saved-cards/subscriber/email/${encodeURIComponent(email)}`);
    const [sub] = await database.handle.db
      .select()
      .from(subscribers)
      .where(eq(subscribers.subscriberId, 120));
    expect(sub!.email).toBe(email);
  });

  it('syncs a subscriber with 1,000 cards, then removes half of them', async () => {
    const cards = Array.from({ length: 1000 }, () => makeCard(130));
    upstream.script.set('id:130', ok(cards));
    expect((await sync({ subscriberId: 130 })).counts.inserted).toBe(1000);
    upstream.script.set('id:130', ok(cards.slice(0, 500)));
    expect((await sync({ subscriberId: 130 })).counts).toMatchObject({ unchanged: 500, removed: 500 });
    const active = (await cardsOf(130)).filter((r) => r.removedAt === null);
    expect(active.length).toBe(500);
  });

  it('two concurrent syncs of one subscriber end consistent', async () => {
    const cards = Array.from({ length: 200 }, () => makeCard(140));
    upstream.script.set('id:140', ok(cards));
    const results = await Promise.all([
      sync({ subscriberId: 140 }),
      sync({ subscriberId: 140 }),
      sync({ subscriberId: 140 }),
    ]);
    // Each either applied its answer or found a newer one applied already (superseded).
    for (const r of results) expect(['succeeded', 'superseded']).toContain(r.status);
    expect(results.some((r) => r.status === 'succeeded')).toBe(true);
    expect(results.reduce((n, r) => n + r.counts.inserted, 0)).toBe(200);
    const changes = await changesOf(140);
    expect(changes.length).toBe(200);
    expect(new Set(changes.map((c) => c.cardId)).size).toBe(200);
    expect((await cardsOf(140)).length).toBe(200);
  });
});

describe('a card that moves', () => {
  it('moves once its old owner’s answer drops it: a plain removal there, a restore here', async () => {
    const moving = makeCard(170);
    const kept = makeCard(170);
    upstream.script.set('id:170', ok([moving, kept]));
    await sync({ subscriberId: 170 });
    // While the old owner still lists it, another subscriber's answer cannot take it (a conflict:
    // test/process/sync-card-conflict.test.ts). Its old owner drops it first, then the new one lists it.
    upstream.script.set('id:170', ok([kept]));
    expect((await sync({ subscriberId: 170 })).counts.removed).toBe(1);
    upstream.script.set('id:171', ok([{ ...moving, subscriberId: 171 }]));
    const result = await sync({ subscriberId: 171 });
    expect(result.counts).toMatchObject({ restored: 1 });
    const [row] = await cardsOf(171);
    expect(row).toMatchObject({ id: moving.id, removedAt: null });
    expect((await changesOf(170)).map((c) => [c.cardId, c.change])).toEqual([
      [moving.id, 'added'],
      [kept.id, 'added'],
      [moving.id, 'removed'],
    ]);
    expect((await changesOf(171)).map((c) => [c.cardId, c.change, c.previous])).toEqual([
      [moving.id, 'restored', expect.objectContaining({ subscriber_id: 170 })],
    ]);
    const [old] = await database.handle.db
      .select()
      .from(subscribers)
      .where(eq(subscribers.subscriberId, 170));
    expect(old!.activeCards).toBe(1);
    // The old owner's next answer no longer lists it: nothing more to remove, no duplicate history.
    const again = await sync({ subscriberId: 170 });
    expect(again.counts.removed).toBe(0);
    expect((await changesOf(170)).filter((c) => c.change === 'removed').length).toBe(1);
  });
});

describe('ordering', () => {
  it('an answer fetched before a newer one was applied is not written over it', async () => {
    const x = makeCard(160);
    upstream.script.set('email:order@example.com', ok([x]));
    await sync({ email: 'order@example.com' });
    // Card X is deleted upstream. A slow lookup by id fetched the old list; a fast one by
    // e-mail fetched the new, empty one, and commits first.
    upstream.script.set('id:160', { ...ok([x]), delayMs: 600 });
    upstream.script.set('email:order@example.com', ok([]));
    const slow = sync({ subscriberId: 160 });
    await new Promise((r) => setTimeout(r, 100));
    const fast = await sync({ email: 'order@example.com' });
    expect(fast).toMatchObject({ status: 'succeeded', counts: { removed: 1 } });
    expect(await slow).toMatchObject({ status: 'superseded', counts: { inserted: 0, restored: 0 } });
    const [row] = await cardsOf(160);
    expect(row!.removedAt).not.toBeNull();
    expect((await changesOf(160)).map((c) => c.change)).toEqual(['added', 'removed']);
  });
});

describe('secrets', () => {
  it('no log line holds the API key, a card token or a full card number', async () => {
    const card = makeCard(150, { cardToken: 'a9c3e1f0b2d4c6e8a9c3e1f0b2d4c6e8' });
    upstream.script.set('id:150', ok([card]));
    await sync({ subscriberId: 150 });
    upstream.script.set('id:150', { status: 401, body: `bad key ${API_KEY}` });
    await sync({ subscriberId: 150 });
    upstream.script.set('id:150', ok([{ ...card, binNumber: '4761 1234 1234 0043' }]));
    await sync({ subscriberId: 150 });
    upstream.script.set('id:150', {
      status: 500,
      body: `trace: token ${card.cardToken} pan 4761123412340043`,
    });
    await sync({ subscriberId: 150 });
    const all = lines.join('\n');
    expect(lines.length).toBeGreaterThan(3);
    expect(all).not.toContain(API_KEY);
    expect(all).not.toContain(card.cardToken);
    expect(all).not.toMatch(/4761[ -]?1234[ -]?1234[ -]?0043/);
    const runs = await runsOf(150);
    const stored = runs.map((r) => r.errorMessage ?? '').join('\n');
    expect(stored).not.toContain(API_KEY);
    expect(stored).not.toContain(card.cardToken);
    expect(stored).not.toMatch(/4761[ -]?1234[ -]?1234[ -]?0043/);
  });
});
