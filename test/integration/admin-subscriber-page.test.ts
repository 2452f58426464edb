import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { latestRunId } from '../../db/admin/index.js';
import { startRefreshRun } from '../../db/refresh/index.js';
import { createApiClient } from '../../src/api/index.js';
import { syncSubscriber } from '../../src/sync/index.js';
import { CSRF, useAdminApp } from '../support/admin-client.js';
import { ADMIN_TOKEN, API_KEY, makeCard, ok, testTokens, useScriptedApi } from '../support/fixtures.js';
import { useTestDatabase } from '../support/helpers.js';

// The ops page through app.fetch: find a subscriber by id or e-mail, look at it, re-sync it and
// follow the run. No worker runs here (test/browser/browser.test.ts runs one): jobs stay waiting, and the
// sync a test needs runs in-process.

const database = useTestDatabase();
const upstream = useScriptedApi();
const { q, logger, get, post } = useAdminApp(database);
let api: ReturnType<typeof createApiClient>;

// Subscriber 5001: two cards, then one changed upstream. 5002: learned by e-mail.
const cardA = makeCard(5001, { cardBankName: 'AKBA' });
const cardB = makeCard(5001, { binNumber: '5400-xxxx-xxxx-1234', cardBankName: 'GARANTI' });
const cardC = makeCard(5002);
const TOKENS = [cardA, cardB, cardC].map((c) => c.cardToken);
const EMAIL = 'Ops.Person@Example.com';
const TIME = /\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ/;

const sync = (target: { subscriberId: number } | { email: string }) =>
  syncSubscriber({ db: database.handle.db, api, logger, tokens: testTokens }, { target, trigger: 'manual' });

beforeAll(async () => {
  api = createApiClient({ baseUrl: upstream.url, apiKey: API_KEY, pathStyle: 'standard', timeoutMs: 2000 });
  upstream.script.set('id:5001', ok([cardA, cardB]));
  await sync({ subscriberId: 5001 });
  upstream.script.set('id:5001', ok([cardA, { ...cardB, cardBankName: 'GARANTI BBVA' }]));
  await sync({ subscriberId: 5001 });
  upstream.script.set(`email:${EMAIL}`, ok([cardC]));
  await sync({ email: EMAIL });
});
afterAll(() => api?.close());

describe('finding a subscriber', () => {
  it('an id goes to its page; a known e-mail, in any case, to its subscriber', async () => {
    const byId = await get('/admin/subscribers?q=%205001%20');
    expect(byId.status).toBe(303);
    expect(byId.headers.get('location')).toBe('/admin/subscribers/5001');
    const byEmail = await get(`/admin/subscribers?q=${encodeURIComponent('ops.PERSON@example.COM')}`);
    expect(byEmail.status).toBe(303);
    expect(byEmail.headers.get('location')).toBe('/admin/subscribers/5002');
  });

  it('an unknown e-mail is a page that says so and offers to re-sync it, escaped', async () => {
    // `'` and `&` are the HTML specials an address may hold (RFC 5322 atext); `"` and `<>` are refused.
    const email = "x'&y@example.com";
    const res = await get(`/admin/subscribers?q=${encodeURIComponent(email)}`);
    expect(res.status).toBe(404);
    const html = await res.text();
    expect(html).toContain('not known yet');
    expect(html).toContain('action="/admin/resync-email"');
    expect(html).toContain('value="x&#39;&amp;y@example.com"');
    expect(html).not.toContain("x'&y@");
    expect(html).toContain('Re-sync this e-mail');
    const breakout = await get(`/admin/subscribers?q=${encodeURIComponent('"><b>x@example.com')}`);
    expect(breakout.status).toBe(400);
    expect(await breakout.text()).not.toContain('"><b>x@');
  });

  it.each([
    ['/admin/subscribers?q=12abc', 'neither a subscriber id (digits) nor an e-mail (name@domain)'],
    ['/admin/subscribers?q=a%40b%40example.com', 'an e-mail must contain exactly one @'],
    [
      '/admin/subscribers?q=%3Cscript%3E%20%40x.com',
      'an e-mail must be the bare address (name@domain), without a display name',
    ],
    [
      '/admin/subscribers?q=ada%20lovelace%40x.com',
      'an e-mail must not contain spaces or control characters',
    ],
    ['/admin/subscribers?q=', 'type a subscriber id or an e-mail'],
    ['/admin/subscribers/abc', 'a subscriber id must be a positive whole number'],
    ['/admin/subscribers/0', 'a subscriber id must be positive'],
    ['/admin/subscribers/9007199254740992', 'a subscriber id must not exceed 9007199254740991'],
  ])('%s is a 400 saying why', async (path, reason) => {
    const res = await get(path);
    expect(res.status).toBe(400);
    const html = await res.text();
    expect(html).toContain(reason);
    expect(html).not.toContain('<script>');
  });

  it('an unknown id is a 404 page that still offers "Re-sync now"', async () => {
    const res = await get('/admin/subscribers/777777');
    expect(res.status).toBe(404);
    const html = await res.text();
    expect(html).toContain('Subscriber 777777 is not known yet');
    expect(html).toMatch(/<form method="post" action="\/admin\/subscribers\/777777\/resync"[^>]*>/);
    expect(html).toContain(`name="_csrf" value="${CSRF}"`);
    expect(html).toContain('Re-sync now');
  });

  it('"Re-sync now" on an unknown id makes it a known subscriber, never synced, as the CLI and the API do', async () => {
    const pool = database.handle.pool;
    const res = await post(
      '/admin/subscribers/777778/resync',
      {},
      { headers: { origin: 'http://admin.test' } },
    );
    expect(res.status).toBe(303);
    const { rows } = await pool.query('select last_success_at from subscribers where subscriber_id = 777778');
    expect(rows).toEqual([{ last_success_at: null }]);
    const audit = await pool.query(
      "select detail from admin_actions where action = 'enqueue' and (detail->>'subscriberId')::int = 777778",
    );
    expect(audit.rows[0]?.detail).toMatchObject({ subscriberId: 777778, enqueued: 1, registered: 1 });
    await pool.query('delete from subscribers where subscriber_id = 777778');
  });
});

describe('the subscriber page', () => {
  it('shows the stored row, the cards, the runs and the history, and never a card token', async () => {
    const res = await get('/admin/subscribers/5001');
    expect(res.status).toBe(200);
    const html = await res.text();
    for (const token of TOKENS) expect(html).not.toContain(token);
    expect(html).not.toMatch(/card_?token/i);
    expect(html).not.toContain(ADMIN_TOKEN);
    expect(html).toContain('<table id="cards">');
    expect(html).toContain(`data-card-id="${cardA.id}"`);
    expect(html).toContain('5400-xxxx-xxxx-1234');
    expect(html).toContain('GARANTI BBVA (100100000)');
    expect(html).toMatch(/<dd id="sub-active-cards">2<\/dd>/);
    expect(html).toMatch(/<dd id="sub-last-status">succeeded<\/dd>/);
    expect((html.match(/<tr data-run-id="\d+" data-status="succeeded"/g) ?? []).length).toBe(2);
    expect(html).toMatch(
      // Not only which field changed: from what, to what.
      new RegExp(
        `<tr data-card-id="${cardB.id}" data-change="updated">.*?<td>card_bank_name: GARANTI → GARANTI BBVA</td>`,
      ),
    );
    expect(html).toMatch(TIME);
    expect(html).not.toContain('id="resync-state"');
    expect(html).not.toContain('http-equiv="refresh"');
    const byEmail = await (await get('/admin/subscribers/5002')).text();
    expect(byEmail).toContain(`<dd id="sub-email">${EMAIL}</dd>`);
    expect(byEmail).not.toContain(cardC.cardToken);
  });

  it("a refresh run's syncs say which run they belong to; a person's re-sync is plain manual", async () => {
    const started = await startRefreshRun(database.handle.db, { trigger: 'manual' });
    if (!started.started) throw new Error('a refresh run is already in progress');
    const { run } = started;
    upstream.script.set('id:5009', ok([makeCard(5009)]));
    await syncSubscriber(
      { db: database.handle.db, api, logger, tokens: testTokens },
      { target: { subscriberId: 5009 }, trigger: 'manual', refreshRunId: run.id },
    );
    const html = await (await get('/admin/subscribers/5009')).text();
    expect(html).toMatch(new RegExp(`<td>\\d+</td><td>manual · refresh run #${run.id}</td>`));
    const person = await (await get('/admin/subscribers/5001')).text();
    expect(person).toMatch(/<td>\d+<\/td><td>manual<\/td>/);
    expect(person).not.toContain('refresh run #');
  });

  it('"Re-sync now" enqueues a manual job and comes back waiting for the run, then shows it', async () => {
    const before = await get('/admin/subscribers/5001');
    const runIds = [...(await before.text()).matchAll(/data-run-id="(\d+)"/g)].map((m) => Number(m[1]));
    const since = Math.max(...runIds);

    const res = await post(
      '/admin/subscribers/5001/resync',
      {},
      { headers: { origin: 'http://admin.test' } },
    );
    expect(res.status).toBe(303);
    const location = res.headers.get('location')!;
    expect(location).toMatch(new RegExp(`^/admin/subscribers/5001\\?since=${since}&requested=\\d+$`));
    const [job] = await q.queue.getJobs(['waiting', 'prioritized']);
    expect(job?.data).toMatchObject({ target: { subscriberId: 5001 }, trigger: 'manual' });

    const pending = await (await get(location)).text();
    expect(pending).toContain('Re-sync requested — waiting for the worker…');
    expect(pending).toContain('<meta http-equiv="refresh" content="1">');
    // A second press adds no job, and says so.
    const again = await post('/admin/subscribers/5001/resync');
    expect(again.headers.get('location')).toContain('&already=1');
    expect(await (await get(again.headers.get('location')!)).text()).toContain('was already queued');

    // The worker's part, in-process: a card is added upstream and the sync runs.
    const added = makeCard(5001, { cardBankName: 'ZIRAAT' });
    upstream.script.set('id:5001', ok([cardA, { ...cardB, cardBankName: 'GARANTI BBVA' }, added]));
    const result = await sync({ subscriberId: 5001 });
    const done = await (await get(location)).text();
    expect(done).toContain(`Re-sync finished: run ${result.syncRunId}, succeeded, +1 ~0 −0`);
    expect(done).not.toContain('http-equiv="refresh"');
    expect(done).toContain(`<tr data-run-id="${result.syncRunId}" data-status="succeeded" class="new">`);
    expect(done).toContain(`<tr data-card-id="${added.id}" class="changed" data-change="added">`);
    expect(done).not.toContain(added.cardToken);
    await q.queue.drain();
  });

  it('stops waiting after a minute and points at the jobs dashboard', async () => {
    const html = await (
      await get(`/admin/subscribers/5001?since=999999&requested=${Date.now() - 61_000}`)
    ).text();
    expect(html).toContain('No new run within 60 s');
    expect(html).toContain('href="/admin/queues"');
    expect(html).not.toContain('http-equiv="refresh"');
  });

  it('keeps waiting past an attempt the queue retries, and shows the run that ends the re-sync', async () => {
    const since = await latestRunId(database.handle.db, 5001);
    const path = `/admin/subscribers/5001?since=${since}&requested=${Date.now()}`;
    upstream.script.set('id:5001', { status: 503 });
    const attempt = await sync({ subscriberId: 5001 });
    const retrying = await (await get(path)).text();
    expect(retrying).toContain(
      `waiting for the worker… Run ${attempt.syncRunId} ended failed (http_5xx); the worker retries it.`,
    );
    expect(retrying).toContain('<meta http-equiv="refresh" content="1">');
    upstream.script.set('id:5001', { status: 404 });
    const last = await sync({ subscriberId: 5001 });
    const done = await (await get(path)).text();
    expect(done).toContain(
      `Re-sync finished: run ${last.syncRunId}, not_found, +0 ~0 −0: the API does not know`,
    );
    expect(done).not.toContain('http-equiv="refresh"');
    expect(done).toContain(`<tr data-run-id="${attempt.syncRunId}" data-status="failed" class="new">`);
  });

  it('"Re-sync this e-mail" enqueues the e-mail and follows it to the subscriber once known', async () => {
    const email = 'subscriber-5003@example.com';
    const res = await post('/admin/resync-email', { email: ` ${email} ` });
    expect(res.status).toBe(303);
    const location = res.headers.get('location')!;
    expect(location).toMatch(
      /^\/admin\/subscribers\?q=subscriber-5003%40example\.com&since=\d+&requested=\d+$/,
    );
    const [job] = await q.queue.getJobs(['waiting', 'prioritized']);
    expect(job?.data).toMatchObject({ target: { email }, trigger: 'manual' });
    const pending = await get(location);
    expect(pending.status).toBe(404);
    expect(await pending.text()).toContain('waiting for the worker');

    await sync({ email });
    const found = await get(location);
    expect(found.status).toBe(303);
    const page = await (await get(found.headers.get('location')!)).text();
    expect(found.headers.get('location')).toMatch(/^\/admin\/subscribers\/5003\?since=\d+&requested=\d+$/);
    expect(page).toMatch(/Re-sync finished: run \d+, succeeded, \+\d+ ~0 −0/);

    expect((await post('/admin/resync-email', { email: 'not an e-mail' })).status).toBe(400);
    await q.queue.drain();
  });
});
