import { mkdirSync } from 'node:fs';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { servedAdmin } from '../support/admin-helpers.js';
import { launchChromium } from '../support/chromium.js';
import { ADMIN_TOKEN } from '../support/fixtures.js';
import { useTestDatabase } from '../support/helpers.js';
import { testQueue } from '../support/queue-helpers.js';
import {
  deliveriesOf,
  QUERY_TOKEN,
  type SeededEndpoint,
  seedWebhookEndpoint,
} from '../support/webhook-page-fixture.js';

// The ops page's webhooks view in Debian's Chromium: from the overview to an endpoint with dead
// letters, the replay button, and the replays queued; the remove button behind its confirmation;
// the reader sees the page but can neither replay nor remove.

const ARTIFACTS = new URL('../../test-artifacts/', import.meta.url).pathname;
const READ_TOKEN = 'browser-webhooks-read-token-3e81c0';

const database = useTestDatabase();
const q = testQueue();
let browser: Browser;
let url: string;
let stop: () => Promise<void>;
let seeded: SeededEndpoint;

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  seeded = await seedWebhookEndpoint(database.handle.pool, 8101);
  ({ url, stop } = await servedAdmin(database, q, { adminReadToken: READ_TOKEN }));
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await stop?.();
  await q.cleanup();
});

describe('the webhooks view in a browser', () => {
  it('the reader sees the endpoint and its dead letters, has no replay button, and a replay posted anyway is refused', async () => {
    const context = await browser.newContext({
      httpCredentials: { username: 'reader', password: READ_TOKEN },
    });
    const page = await context.newPage();
    await page.goto(`${url}/admin/webhooks`);
    const endpoint = page.locator(`#endpoint-${seeded.id}`);
    await expect(endpoint.locator('.dead-letters').textContent()).resolves.toBe('2');
    expect(await page.getByRole('button', { name: 'Replay' }).count()).toBe(0);
    expect(await page.getByRole('button', { name: 'Remove endpoint' }).count()).toBe(0);
    await expect(endpoint.locator('.read-only').textContent()).resolves.toContain(
      'you may look but not replay',
    );
    const res = await context.request.post(`${url}/admin/webhooks/${seeded.id}/replay`, {
      form: { since: '0-0' },
      headers: { accept: 'text/html' },
    });
    expect(res.status()).toBe(403);
    expect(await res.text()).toContain('Refused: the read token');
    expect((await deliveriesOf(database.handle.pool, seeded.id)).filter((d) => d.replay)).toEqual([]);
    await context.close();
  });

  it('the operator goes from the overview to an endpoint with dead letters, clicks Replay and sees them queued', async () => {
    const context = await browser.newContext({ httpCredentials: { username: 'ops', password: ADMIN_TOKEN } });
    const page = await context.newPage();
    const dialogs: string[] = [];
    page.on('dialog', async (d) => {
      dialogs.push(d.message());
      await d.dismiss();
    });
    await page.goto(`${url}/admin`);
    await page.getByRole('link', { name: /Webhook endpoints/ }).click();
    await page.waitForURL(/\/admin\/webhooks$/);

    const endpoint = page.locator(`#endpoint-${seeded.id}`);
    await expect(endpoint.locator('.url').textContent()).resolves.toBe('http://127.0.0.1:9/hook');
    await expect(endpoint.locator('.state').textContent()).resolves.toMatch(/^FAILING since /);
    await expect(endpoint.locator('.dead-letters').textContent()).resolves.toBe('2');
    expect(await endpoint.locator(`#dead-${seeded.id} tr[data-status="dead"]`).count()).toBe(2);
    // The hostile description and excerpt are text, not markup.
    await expect(endpoint.locator('.description').textContent()).resolves.toBe(
      'CRM <b>hook</b> "fraud" & co',
    );
    await expect(endpoint.locator(`#dead-${seeded.id} code`).first().textContent()).resolves.toBe(
      '<script>alert(1)</script> upstream broke',
    );
    expect(await page.content()).not.toContain(QUERY_TOKEN);
    expect(await page.content()).not.toContain(seeded.secret);
    await page.screenshot({ path: `${ARTIFACTS}ops-webhooks.png`, fullPage: true });

    await endpoint.getByRole('button', { name: 'Replay' }).click();
    await page.waitForURL(/\/admin\/webhooks\?done=replayed&endpoint=\d+&replayed=2#endpoint-\d+$/);
    await expect(page.locator('#flash').textContent()).resolves.toBe(
      `Endpoint ${seeded.id}: 2 events queued again (replay).`,
    );
    const latest = page.locator(`#latest-${seeded.id}`);
    for (const event of seeded.dead) {
      await expect(
        latest.locator('tr', { hasText: event }).filter({ hasText: 'pending (replay)' }).count(),
      ).resolves.toBe(1);
    }
    await page.screenshot({ path: `${ARTIFACTS}ops-webhooks-replayed.png`, fullPage: true });
    expect(dialogs).toEqual([]);
    expect((await deliveriesOf(database.handle.pool, seeded.id)).filter((d) => d.replay)).toEqual(
      seeded.dead.map((eventId) => ({ eventId, status: 'pending', replay: true })),
    );
    await context.close();
  });

  it('the operator removes an endpoint: the button does nothing until the confirmation is ticked, then it is gone', async () => {
    const going = await seedWebhookEndpoint(database.handle.pool, 8102);
    const context = await browser.newContext({ httpCredentials: { username: 'ops', password: ADMIN_TOKEN } });
    const page = await context.newPage();
    await page.goto(`${url}/admin/webhooks`);
    const endpoint = page.locator(`#endpoint-${going.id}`);
    const confirm = endpoint.getByRole('checkbox', {
      name: /Remove endpoint \d+: 1 event .* will not be sent/,
    });
    // Unticked, the browser refuses to send the form.
    await endpoint.getByRole('button', { name: 'Remove endpoint' }).click();
    expect(
      await confirm.evaluate(
        (el) => (el as unknown as { validity: { valueMissing: boolean } }).validity.valueMissing,
      ),
    ).toBe(true);
    expect(page.url()).toBe(`${url}/admin/webhooks`);
    const { rows } = await database.handle.pool.query(
      'select removed_at from webhook_endpoints where id = $1',
      [going.id],
    );
    expect(rows[0].removed_at).toBeNull();

    await confirm.check();
    await endpoint.getByRole('button', { name: 'Remove endpoint' }).click();
    await page.waitForURL(/\/admin\/webhooks\?done=removed&endpoint=\d+&pending=1&capped=0&lag=\d+$/);
    await expect(page.locator('#flash').textContent()).resolves.toMatch(
      new RegExp(
        `^Endpoint ${going.id} removed: 1 event \\(the oldest \\d+ s old\\) still waited for it and will not be sent\\.`,
      ),
    );
    expect(await page.locator(`#endpoint-${going.id}`).count()).toBe(0);
    expect(await page.locator(`#endpoint-${seeded.id}`).count()).toBe(1);
    await page.screenshot({ path: `${ARTIFACTS}ops-webhooks-removed.png`, fullPage: true });
    await context.close();
  });
});
