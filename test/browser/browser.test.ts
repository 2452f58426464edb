import { copyFileSync, mkdirSync } from 'node:fs';
import { Worker } from 'bullmq';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createRedis } from '../../jobs/redis.js';
import { createRefreshQueue, REFRESH_QUEUE_NAME } from '../../jobs/refresh/index.js';
import { enqueueSyncs, type SyncWorker, startSyncWorker } from '../../jobs/sync/index.js';
import { createApiClient } from '../../src/api/index.js';
import { cardsFor } from '../../src/mock-api/data.js';
import { syncSubscriber } from '../../src/sync/index.js';
import { servedAdmin } from '../support/admin-helpers.js';
import { launchChromium } from '../support/chromium.js';
import { ADMIN_TOKEN, API_KEY, makeCard, ok, testTokens, useScriptedApi } from '../support/fixtures.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';
import { testQueue } from '../support/queue-helpers.js';

// The pages a person looks at, in a real browser: Debian's Chromium driven by playwright-core.

const ARTIFACTS = new URL('../../test-artifacts/', import.meta.url).pathname;
const TOKEN = ADMIN_TOKEN;
const READ_TOKEN = 'browser-read-token-5a0c7e9f13';

const database = useTestDatabase();
const upstream = useScriptedApi();
const q = testQueue();
let browser: Browser;
let url: string;
let stop: () => Promise<void>;

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  const { logger } = captureLogger();
  const api = createApiClient({
    baseUrl: upstream.url,
    apiKey: API_KEY,
    pathStyle: 'standard',
    timeoutMs: 2000,
  });
  for (const id of [901, 902, 903]) {
    await syncSubscriber(
      { db: database.handle.db, api, logger, tokens: testTokens },
      { target: { subscriberId: id }, trigger: 'manual' },
    );
  }
  await api.close();
  await enqueueSyncs(q.queue, [{ subscriberId: 904 }], 'api');
  ({ url, stop } = await servedAdmin(database, q, { logger, adminToken: TOKEN, adminReadToken: READ_TOKEN }));
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await stop?.();
  await q.cleanup();
});

describe('admin pages in a browser', () => {
  it('asks for the token, then shows the overview with a freshness chart of the real subscribers', async () => {
    const anonymous = await browser.newContext();
    // Without credentials the browser gets the Basic challenge and cannot open the page.
    await expect((await anonymous.newPage()).goto(`${url}/admin`)).rejects.toThrow(/AUTH|401/);
    expect((await anonymous.request.get(`${url}/admin`)).status()).toBe(401);
    await anonymous.close();

    const context = await browser.newContext({ httpCredentials: { username: 'ops', password: TOKEN } });
    const page = await context.newPage();
    const res = await page.goto(`${url}/admin`);
    expect(res?.status()).toBe(200);
    await expect(page.locator('#queue-state').textContent()).resolves.toBe('running');
    await expect(page.locator('#count-waiting').textContent()).resolves.toBe('1');
    const recent = page.locator('#freshness-chart g[data-bucket="within 1 h"]');
    await expect(recent.getAttribute('data-count')).resolves.toBe('3');
    const bar = await recent.locator('rect').boundingBox();
    expect(bar?.width).toBeGreaterThan(100);
    await page.screenshot({ path: `${ARTIFACTS}admin-overview.png`, fullPage: true });
    await context.close();
  }, 30_000);

  it('the jobs dashboard lists the queue and its waiting job', async () => {
    const context = await browser.newContext({ httpCredentials: { username: 'ops', password: TOKEN } });
    const page = await context.newPage();
    await page.goto(`${url}/admin`);
    await page.getByRole('link', { name: /Jobs dashboard/ }).click();
    await page.getByText('saved-cards-sync').first().waitFor({ timeout: 15_000 });
    await page.goto(`${url}/admin/queues/queue/saved-cards-sync?status=waiting`);
    await page
      .getByText(/id:904/)
      .first()
      .waitFor({ timeout: 15_000 });
    await page.screenshot({ path: `${ARTIFACTS}admin-dashboard.png`, fullPage: true });
    await context.close();
  }, 30_000);

  it('the jobs dashboard opens with the token in the URL, and loads nothing from elsewhere', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const watched = await watch(page);
    const { host } = new URL(url);
    await page.goto(`http://ops:${encodeURIComponent(TOKEN)}@${host}/admin/queues`);
    // The queue cards, counted and in English: both come from the page's own requests. (With the
    // credentials left in its URL, Chromium shows the cards after a while, but as message keys.)
    const main = page.locator('main');
    await main.getByRole('link', { name: 'saved-cards-sync' }).waitFor({ timeout: 15_000 });
    await main.getByText('1 Job', { exact: true }).waitFor({ timeout: 5_000 });
    await expect(main.getByText('Loading').count()).resolves.toBe(0);
    // The page dropped the credentials from its URL; the browser sends the ones it cached.
    expect(page.url()).toBe(`${url}/admin/queues`);
    await page.goto(`${url}/admin/queues/queue/saved-cards-sync?status=waiting`);
    await page
      .getByText(/id:904/)
      .first()
      .waitFor({ timeout: 15_000 });
    // The job-data editor (CodeMirror) styles itself with a <style> element written at run time.
    await page.locator('main button:has(svg.lucide-pencil)').first().click();
    const editor = page.getByRole('dialog').locator('.cm-editor');
    await editor.waitFor({ timeout: 5_000 });
    const display = editor.evaluate(
      (e) =>
        (globalThis as unknown as { getComputedStyle(e: unknown): { display: string } }).getComputedStyle(e)
          .display,
    );
    await expect(display).resolves.toBe('flex');
    await page.waitForLoadState('networkidle');
    await page.screenshot({ path: `${ARTIFACTS}admin-dashboard-token-url.png`, fullPage: true });

    expect(watched.requests.length).toBeGreaterThan(5);
    expect(watched.requests.filter((r) => new URL(r).host !== host)).toEqual([]);
    expect(await watched.violations()).toEqual([]);
    expect(watched.errors).toEqual([]);
    const res = await context.request.get(`${url}/admin/queues`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(res.headers()['content-security-policy']).toMatch(/^default-src 'self';/);
    expect(await res.text()).not.toMatch(/fonts\.googleapis|fonts\.gstatic/);
    await context.close();
  }, 30_000);
});

describe('the read token in a browser', () => {
  it('shows the jobs dashboard without a button that acts, and the overview without forms', async () => {
    await failOneRefreshJob();
    const failedPage = `${url}/admin/queues/queue/saved-cards-refresh?status=failed`;
    const seen: Record<string, string[]> = {};
    for (const [who, password] of [
      ['operator', TOKEN],
      ['reader', READ_TOKEN],
    ] as const) {
      const context = await browser.newContext({ httpCredentials: { username: who, password } });
      const page = await context.newPage();
      await page.goto(failedPage);
      await page.getByText(FAILED_REFRESH_JOB).first().waitFor({ timeout: 15_000 });
      await page.waitForLoadState('networkidle');
      seen[who] = await buttonsOf(page);
      await page.screenshot({ path: `${ARTIFACTS}admin-dashboard-${who}.png`, fullPage: true });
      await context.close();
    }
    // The same failed job: the operator may retry, clean, duplicate, edit or remove it; the reader
    // only reads its data, options, logs and error.
    const acting = ['Retry all', 'Clean all', 'refresh-cw', 'files', 'pencil', 'trash', 'ellipsis-vertical'];
    for (const button of acting) expect(seen.operator).toContain(button);
    for (const button of acting) expect(seen.reader).not.toContain(button);
    expect(seen.reader).toEqual(expect.arrayContaining(['Error', 'Data', 'Options', 'Logs']));

    const context = await browser.newContext({
      httpCredentials: { username: 'reader', password: READ_TOKEN },
    });
    const page = await context.newPage();
    await page.goto(`${url}/admin`);
    await expect(page.locator('#queue-state').textContent()).resolves.toBe('running');
    await expect(page.locator('#pause-form').count()).resolves.toBe(0);
    await expect(page.locator('.read-only').textContent()).resolves.toContain('you may look but not pause');
    await page.getByRole('heading', { name: 'Recent operator actions (admin_actions)' }).waitFor();
    await page.screenshot({ path: `${ARTIFACTS}admin-overview-reader.png`, fullPage: true });
    // What a button would have asked, asked by hand: refused, and the job is still there, failed.
    const retry = await context.request.put(
      `${url}/admin/queues/api/queues/saved-cards-refresh/${FAILED_REFRESH_JOB}/retry`,
    );
    expect(retry.status()).toBe(403);
    expect(await retry.text()).toContain('the read token may look but not act');
    const refreshQueue = createRefreshQueue(q.redis, q.prefix);
    await expect((await refreshQueue.getJob(FAILED_REFRESH_JOB))?.getState()).resolves.toBe('failed');
    await refreshQueue.close();
    await context.close();
  }, 60_000);
});

const FAILED_REFRESH_JOB = 'browser-failed-refresh';

/** A refresh job failed for good (no refresh worker runs in this file), for the dashboard's retry buttons. */
async function failOneRefreshJob(): Promise<void> {
  const refreshQueue = createRefreshQueue(q.redis, q.prefix);
  await refreshQueue.add('refresh', { trigger: 'manual' }, { jobId: FAILED_REFRESH_JOB, attempts: 1 });
  await refreshQueue.close();
  const connection = createRedis(inject('redisUrl'), { blocking: true });
  const worker = new Worker(REFRESH_QUEUE_NAME, null, { connection, prefix: q.prefix });
  const job = await worker.getNextJob('browser-test');
  await job?.moveToFailed(new Error('failed on purpose by browser.test.ts'), 'browser-test');
  await worker.close();
  connection.disconnect();
}

/** What each button on the page says: its text, label or icon. */
function buttonsOf(page: Page): Promise<string[]> {
  return page.locator('main button').evaluateAll((elements) =>
    elements.map((e) => {
      const b = e as unknown as {
        textContent: string | null;
        innerHTML: string;
        getAttribute(n: string): string | null;
      };
      const icon = /lucide-([a-z-]+)/.exec(b.innerHTML)?.[1];
      return (b.textContent?.trim() || b.getAttribute('aria-label') || b.getAttribute('title') || icon) ?? '';
    }),
  );
}

/** Every request a page makes, its console errors and uncaught errors, and its CSP violations. */
async function watch(page: Page) {
  const requests: string[] = [];
  const errors: string[] = [];
  page.on('request', (r) => requests.push(r.url()));
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(e.message));
  // Recorded by the page itself: a violation is an event there before it is a console message.
  await page.addInitScript(() => {
    const w = globalThis as unknown as {
      violations: string[];
      addEventListener(type: string, f: (e: { violatedDirective: string; blockedURI: string }) => void): void;
    };
    w.violations = [];
    w.addEventListener('securitypolicyviolation', (e) =>
      w.violations.push(`${e.violatedDirective} ${e.blockedURI}`),
    );
  });
  return {
    requests,
    errors,
    violations: () => page.evaluate(() => (globalThis as unknown as { violations: string[] }).violations),
  };
}

describe('the ops page in a browser', () => {
  const DOCS = new URL('../../docs/', import.meta.url).pathname;
  let worker: SyncWorker | undefined;
  let workerApi: ReturnType<typeof createApiClient> | undefined;
  afterAll(async () => {
    await worker?.close(5000);
    await workerApi?.close();
  });

  it('finds a subscriber, re-syncs it after an upstream change and watches the run land; pauses and resumes', async () => {
    // A real worker on the test queue, against the scripted API, as in production.
    workerApi = createApiClient({
      baseUrl: upstream.url,
      apiKey: API_KEY,
      pathStyle: 'standard',
      timeoutMs: 2000,
    });
    worker = await startSyncWorker(
      {
        db: database.handle.db,
        api: workerApi,
        logger: captureLogger().logger,
        tokens: testTokens,
        queue: q.queue,
        redis: q.redis,
      },
      { redisUrl: inject('redisUrl'), prefix: q.prefix, concurrency: 2 },
    );
    const context = await browser.newContext({ httpCredentials: { username: 'ops', password: TOKEN } });
    const page = await context.newPage();
    const search = (text: string) =>
      page.getByRole('searchbox', { name: 'subscriber id or e-mail' }).first().fill(text);
    const find = () => page.getByRole('button', { name: 'Find subscriber' }).first().click();

    // Find subscriber 901 by id: its four cards and its one run.
    await page.goto(`${url}/admin`);
    await search('901');
    await find();
    await page.waitForURL(/\/admin\/subscribers\/901$/);
    // At 1,300 px the card table stays inside the page's frame: what does not fit scrolls
    // within it, and the page itself never scrolls sideways.
    await page.setViewportSize({ width: 1300, height: 900 });
    const fit = await page.evaluate(() => {
      // In the page: the test's own types know no DOM.
      interface Box {
        right: number;
      }
      interface El {
        getBoundingClientRect(): Box;
        parentElement: El;
        scrollWidth: number;
        clientWidth: number;
      }
      const document = (
        globalThis as unknown as { document: { body: El; documentElement: El; querySelector(s: string): El } }
      ).document;
      const frame = document.body.getBoundingClientRect();
      const box = document.querySelector('#cards').parentElement.getBoundingClientRect();
      const root = document.documentElement;
      return {
        boxRight: Math.round(box.right),
        frameRight: Math.round(frame.right),
        pageOverflow: root.scrollWidth - root.clientWidth,
      };
    });
    expect(fit.boxRight).toBeLessThanOrEqual(fit.frameRight);
    expect(fit.pageOverflow).toBe(0);
    const before = cardsFor(901);
    await expect(page.locator('#subscriber-id').textContent()).resolves.toBe('901');
    await expect(page.locator('table#cards tbody tr').count()).resolves.toBe(before.length);
    await expect(page.locator('table#runs tbody tr').count()).resolves.toBe(1);
    await expect(page.locator('#sub-active-cards').textContent()).resolves.toBe(String(before.length));
    await page.screenshot({ path: `${ARTIFACTS}ops-search.png`, fullPage: true });

    // Upstream: the first card changes bank, the last one goes away, a new one appears.
    const [first, ...rest] = before;
    const added = makeCard(901, { cardBankName: 'VAKIFBANK', binNumber: '4111-xxxx-xxxx-0007' });
    const gone = rest.at(-1)!;
    // The answer takes a moment, so the page is seen waiting before the run lands.
    upstream.script.set('id:901', {
      ...ok([{ ...first!, cardBankName: 'AKBANK T.A.S.' }, ...rest.slice(0, -1), added]),
      delayMs: 1200,
    });

    await page.getByRole('button', { name: 'Re-sync now' }).click();
    await page.waitForURL(/\/admin\/subscribers\/901\?since=\d+/);
    await expect(page.locator('#resync-state').textContent()).resolves.toContain(
      'Re-sync requested — waiting for the worker…',
    );
    // The page reloads itself until the worker's run is there.
    const state = page.locator('#resync-state', { hasText: 'Re-sync finished' });
    await state.waitFor({ timeout: 20_000 });
    // The element shows while the reloaded page is still being parsed: let it finish.
    await page.waitForLoadState('load');
    const runId = await state.getAttribute('data-run-id');
    await expect(state.textContent()).resolves.toContain(`run ${runId}, succeeded, +1 ~1 −1`);
    await expect(page.locator(`table#runs tr.new[data-run-id="${runId}"]`).count()).resolves.toBe(1);
    await expect(page.locator('table#runs tbody tr').count()).resolves.toBe(2);
    const changed = (id: number) => page.locator(`table#cards tr.changed[data-card-id="${id}"]`);
    await expect(changed(added.id).getAttribute('data-change')).resolves.toBe('added');
    await expect(changed(first!.id).getAttribute('data-change')).resolves.toBe('updated');
    await expect(changed(gone.id).getAttribute('data-change')).resolves.toBe('removed');
    await expect(changed(added.id).textContent()).resolves.toContain('VAKIFBANK');
    await expect(page.locator('#sub-active-cards').textContent()).resolves.toBe(String(before.length));
    const html = await page.content();
    for (const card of [...before, added]) expect(html).not.toContain(card.cardToken);
    // The page stopped reloading: it is still the same document a few seconds later.
    await page.evaluate(() => {
      (globalThis as unknown as { marker: boolean }).marker = true;
    });
    await new Promise((r) => setTimeout(r, 2500));
    await expect(page.evaluate(() => (globalThis as unknown as { marker?: boolean }).marker)).resolves.toBe(
      true,
    );
    await page.screenshot({ path: `${ARTIFACTS}ops-subscriber.png`, fullPage: true });
    mkdirSync(DOCS, { recursive: true });
    copyFileSync(`${ARTIFACTS}ops-subscriber.png`, `${DOCS}ops-page.png`);

    // An e-mail nobody has synced yet: not known, re-sync it, and land on its subscriber.
    await search('subscriber-905@example.com');
    await find();
    await expect(page.locator('#unknown').textContent()).resolves.toContain('not known yet');
    await page.getByRole('button', { name: 'Re-sync this e-mail' }).click();
    await page.waitForURL(/\/admin\/subscribers\/905\?/, { timeout: 20_000 });
    await page.locator('#resync-state', { hasText: 'Re-sync finished' }).waitFor({ timeout: 20_000 });
    await page.waitForLoadState('load');
    await expect(page.locator('#sub-email').textContent()).resolves.toBe('subscriber-905@example.com');
    await expect(page.locator('table#cards tbody tr').count()).resolves.toBe(cardsFor(905).length);
    // Now known: the same e-mail in another case goes straight to the subscriber.
    await search('SUBSCRIBER-905@Example.COM');
    await find();
    await page.waitForURL(/\/admin\/subscribers\/905$/);

    // Pause with a reason from the overview, see it, resume.
    await page.goto(`${url}/admin`);
    await page.getByLabel('Reason').fill('upstream maintenance until 06:00');
    await page.getByRole('button', { name: 'Pause processing' }).click();
    await page.waitForURL(/\/admin\?done=paused$/);
    await expect(page.locator('#queue-state').textContent()).resolves.toBe('PAUSED');
    await expect(page.locator('#pause-reason').textContent()).resolves.toContain(
      'upstream maintenance until 06:00',
    );
    await expect(q.queue.isPaused()).resolves.toBe(true);
    await page.screenshot({ path: `${ARTIFACTS}ops-paused.png`, fullPage: true });
    await page.getByRole('button', { name: 'Resume processing' }).click();
    await page.waitForURL(/\/admin\?done=resumed$/);
    await expect(page.locator('#queue-state').textContent()).resolves.toBe('running');
    await expect(page.locator('#flash').textContent()).resolves.toContain('Resumed');
    await expect(q.queue.isPaused()).resolves.toBe(false);
    // Both are in the audit trail the overview lists, newest first, as the operator over HTTP.
    const actions = page.locator('table#actions tbody tr');
    await expect(actions.nth(0).getAttribute('data-action')).resolves.toBe('resume');
    await expect(actions.nth(1).getAttribute('data-action')).resolves.toBe('pause');
    await expect(actions.nth(1).textContent()).resolves.toContain('upstream maintenance until 06:00');
    await context.close();
  }, 90_000);
});
