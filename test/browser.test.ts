import { existsSync, mkdirSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueSyncs } from '../jobs/queue.js';
import { createRefreshQueue } from '../jobs/refresh.js';
import { createAdminApp } from '../src/admin/app.js';
import { createApiClient } from '../src/api/client.js';
import { createMetrics } from '../src/metrics.js';
import { syncSubscriber } from '../src/sync/sync-subscriber.js';
import { ADMIN_TOKEN, API_KEY, useScriptedApi } from './fixtures.js';
import { captureLogger, useTestDatabase } from './helpers.js';
import { testQueue } from './queue-helpers.js';

// The pages a person looks at, in a real browser: Debian's Chromium driven by playwright-core.

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ARTIFACTS = new URL('../test-artifacts/', import.meta.url).pathname;
const TOKEN = ADMIN_TOKEN;

const database = useTestDatabase();
const upstream = useScriptedApi();
const q = testQueue();
let browser: Browser;
let url: string;
let stop: () => Promise<void>;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`no Chromium at ${CHROMIUM}: install it (apt-get install chromium) or set CHROMIUM_PATH`);
  }
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
      { db: database.handle.db, api, logger },
      { target: { subscriberId: id }, trigger: 'manual' },
    );
  }
  await api.close();
  await enqueueSyncs(q.queue, [{ subscriberId: 904 }], 'api');
  const refreshQueue = createRefreshQueue(q.redis, q.prefix);
  const admin = createAdminApp({
    db: database.handle.db,
    redis: q.redis,
    syncQueue: q.queue,
    refreshQueue,
    metrics: createMetrics({ defaultMetrics: false }),
    logger,
    adminToken: TOKEN,
    prefix: q.prefix,
  });
  url = await admin.start(0, '127.0.0.1');
  stop = async () => {
    await admin.stop();
    await refreshQueue.close();
  };
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
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
});
