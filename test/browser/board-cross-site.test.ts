import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QUEUE_NAME } from '../../jobs/sync/index.js';
import { servedAdmin, testAdminApp } from '../support/admin-helpers.js';
import { launchChromium } from '../support/chromium.js';
import { ADMIN_TOKEN } from '../support/fixtures.js';
import { useTestDatabase } from '../support/helpers.js';
import { testQueue } from '../support/queue-helpers.js';

// An operator logs in to Bull Board with the README's URL form (the browser caches the Basic
// credentials), then opens another site. That site posts forms and requests to the board's routes
// that act: nothing is added, nothing changes, no audit row blames the operator. And no other site
// can frame an admin page. Real Chromium, two origins on loopback (127.0.0.1 and localhost).

const database = useTestDatabase();
const q = testQueue();
let browser: Browser;
let admin: string;
let evil: Server;
let evilUrl: string;
let stop: () => Promise<void>;
/** The page the other site serves, set by each test. */
let evilPage = '';

beforeAll(async () => {
  const served = await servedAdmin(database, q);
  admin = served.url;
  evil = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end(evilPage);
  });
  await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
  evilUrl = `http://localhost:${(evil.address() as AddressInfo).port}`;
  stop = async () => {
    await served.stop();
    await new Promise((resolve) => evil.close(resolve));
  };
  browser = await launchChromium();
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await stop?.();
  await q.cleanup();
});

const jobCount = async () => {
  const c = await q.queue.getJobCounts('waiting', 'prioritized', 'delayed', 'active');
  return Object.values(c).reduce((a, b) => a + b, 0);
};
const auditRows = async () =>
  (
    await database.handle.pool.query(
      `select count(*)::int as n from admin_actions where action = 'dashboard'`,
    )
  ).rows[0].n;

/** A browser that logged in to the board with the README's URL form, its credentials cached. */
async function loggedIn() {
  const context = await browser.newContext();
  const page = await context.newPage();
  const withCredentials = admin.replace('http://', `http://ops:${encodeURIComponent(ADMIN_TOKEN)}@`);
  await page.goto(`${withCredentials}/admin/queues`);
  await page.getByText('saved-cards-sync').first().waitFor({ timeout: 15_000 });
  return { context, page };
}

const ADD = () => `${admin}/admin/queues/api/queues/${QUEUE_NAME}/add`;
// A text/plain form whose one field's name and value spell a JSON body.
const JSON_NAME =
  '{"name":"sync","data":{"target":{"subscriberId":4242},"trigger":"manual"},"options":{"priority":1},"x":"';

describe('another site, while the operator is logged in', () => {
  it('cannot add a job: text/plain, urlencoded and multipart forms, and a no-cors fetch, are refused', async () => {
    const { context, page } = await loggedIn();
    const before = { jobs: await jobCount(), audit: await auditRows() };
    const variants = [
      `<form method="post" enctype="text/plain" action="${ADD()}"><input name='${JSON_NAME}' value='"}'></form>`,
      `<form method="post" action="${ADD()}"><input name="name" value="sync"><input name="data" value="{}"></form>`,
      `<form method="post" enctype="multipart/form-data" action="${ADD()}"><input name="name" value="sync"></form>`,
    ];
    for (const form of variants) {
      evilPage = `<!doctype html><body>${form}<script>document.forms[0].submit()</script></body>`;
      const answered = page.waitForResponse((r) => r.url() === ADD());
      await page.goto(evilUrl);
      const res = await answered;
      expect([403, 415], form).toContain(res.status());
    }
    evilPage = `<!doctype html><body><script>
      fetch(${JSON.stringify(ADD())}, { method: 'POST', mode: 'no-cors', credentials: 'include',
        headers: { 'content-type': 'text/plain' }, body: JSON.stringify({ name: 'sync', data: {}, options: {} }) })
        .finally(() => { document.title = 'sent'; });
    </script></body>`;
    await page.goto(evilUrl);
    await page.waitForFunction("document.title === 'sent'");
    expect(await jobCount()).toBe(before.jobs);
    expect(await auditRows()).toBe(before.audit);
    await context.close();
  }, 60_000);

  it('the board itself still acts: its own pause button pauses the queue, audited', async () => {
    const { context, page } = await loggedIn();
    const before = await auditRows();
    // As the board's own code sends it: an XMLHttpRequest PUT with no body and no content type.
    const res = await page.evaluate(`new Promise((resolve) => {
      const xhr = new XMLHttpRequest();
      xhr.open('PUT', '/admin/queues/api/queues/${QUEUE_NAME}/pause');
      xhr.onload = () => resolve(xhr.status);
      xhr.send();
    })`);
    expect(res).toBe(200);
    expect(await q.queue.isPaused()).toBe(true);
    expect(await auditRows()).toBe(before + 1);
    await q.queue.resume();
    await context.close();
  }, 60_000);

  it('cannot frame an admin page', async () => {
    const { context, page } = await loggedIn();
    evilPage = `<!doctype html><body><iframe id="f" src="${admin}/admin"></iframe><iframe id="g" src="${admin}/admin/queues"></iframe></body>`;
    const framed: (string | undefined)[] = [];
    page.on('response', (r) => {
      if (r.url().startsWith(admin)) framed.push(r.headers()['x-frame-options']);
    });
    await page.goto(evilUrl);
    await page.waitForTimeout(500);
    expect(framed.length).toBeGreaterThanOrEqual(2);
    for (const header of framed) expect(header).toBe('DENY');
    // The frames stay empty: Chromium blocks a page whose headers forbid framing.
    for (const frame of page.frames().slice(1)) {
      const text = await frame.evaluate('document.body ? document.body.innerText : ""').catch(() => '');
      expect(text).not.toContain('saved-cards-sync');
    }
    await context.close();
  }, 60_000);
});

describe('every request that acts on the board, without a browser', () => {
  it('needs a same-origin Origin or Sec-Fetch-Site and a JSON body type; every response forbids framing', async () => {
    const { admin: built, close } = testAdminApp(database, q);
    const app = built.app;
    const routes = [
      ['POST', `/admin/queues/api/queues/${QUEUE_NAME}/add`],
      ['PUT', `/admin/queues/api/queues/${QUEUE_NAME}/pause`],
      ['PUT', `/admin/queues/api/queues/${QUEUE_NAME}/retry/failed`],
      ['DELETE', `/admin/queues/api/queues/${QUEUE_NAME}/clean/completed`],
      ['PATCH', `/admin/queues/api/queues/${QUEUE_NAME}/x/update-data`],
    ] as const;
    const types = [
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      undefined,
    ];
    const origins: Record<string, string>[] = [
      {},
      { origin: 'http://evil.example' },
      { origin: 'null' },
      { origin: 'http://admin.test.evil.example' },
      { 'sec-fetch-site': 'cross-site' },
      { 'sec-fetch-site': 'same-site', origin: 'http://admin.test' },
      { 'sec-fetch-site': 'none' },
    ];
    const before = await jobCount();
    const send = (method: string, path: string, headers: Record<string, string>) =>
      app.fetch(
        new Request(`http://admin.test${path}`, {
          method,
          headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...headers },
          body: '{"name":"sync","data":{},"options":{}}',
        }),
      );
    for (const [method, path] of routes) {
      for (const type of [...types, 'application/json']) {
        for (const origin of origins) {
          const res = await send(method, path, { ...(type ? { 'content-type': type } : {}), ...origin });
          expect(res.status, `${method} ${path} ${type} ${JSON.stringify(origin)}`).toBe(403);
          expect(res.headers.get('x-frame-options')).toBe('DENY');
        }
      }
      for (const type of types) {
        const res = await send(method, path, {
          ...(type ? { 'content-type': type } : {}),
          origin: 'http://admin.test',
          'sec-fetch-site': 'same-origin',
        });
        expect(res.status, `${method} ${path} ${type}`).toBe(415);
      }
    }
    expect(await jobCount()).toBe(before);
    expect(await q.queue.isPaused()).toBe(false);
    // Same origin and JSON: the board answers (added, here).
    const ok = await send('POST', routes[0][1], {
      'content-type': 'application/json',
      origin: 'http://admin.test',
    });
    expect(ok.status).toBe(200);
    await q.queue.obliterate({ force: true });
    for (const path of ['/admin', '/admin/queues', '/healthz', '/no-such-page', '/api/resync']) {
      const res = await app.fetch(new Request(`http://admin.test${path}`));
      expect(res.headers.get('x-frame-options'), path).toBe('DENY');
      expect(res.headers.get('content-security-policy'), path).toMatch(/frame-ancestors 'none'/);
    }
    await close();
  }, 60_000);
});
