import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createRefreshQueue } from '../../jobs/refresh/index.js';
import { pauseQueue, startSyncWorker } from '../../jobs/sync/index.js';
import { createAdminApp } from '../../src/admin/app.js';
import { createApiClient } from '../../src/api/index.js';
import { createMetrics } from '../../src/metrics/index.js';
import { ADMIN_TOKEN, API_KEY, testTokens, useScriptedApi } from '../support/fixtures.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';
import { testQueue } from '../support/queue-helpers.js';

// The alerting pack (deploy/): the rules' own unit tests with promtool, and every metric the rules
// and the Grafana dashboard use is one /metrics really serves, with values that mean what they say.

const DEPLOY = new URL('../../deploy/', import.meta.url).pathname;
const rules = readFileSync(`${DEPLOY}prometheus/cards-sync-rules.yml`, 'utf8');
const dashboard = readFileSync(`${DEPLOY}grafana/cards-sync-dashboard.json`, 'utf8');
const promtool = spawnSync('promtool', ['--version']).status === 0;

const database = useTestDatabase();
const upstream = useScriptedApi();
const { logger } = captureLogger('info');
const q = testQueue();
const refreshQueue = createRefreshQueue(q.redis, q.prefix);
const metrics = createMetrics({ defaultMetrics: false });
let admin: ReturnType<typeof createAdminApp> | undefined;
const scrape = async () => {
  admin ??= createAdminApp({
    db: database.handle.db,
    redis: q.redis,
    syncQueue: q.queue,
    refreshQueue,
    metrics,
    logger,
    adminToken: ADMIN_TOKEN,
    prefix: q.prefix,
  });
  return (await admin.app.fetch(new Request('http://x/metrics'))).text();
};
const value = (text: string, series: string) => {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
};

let stopWorker: () => Promise<unknown> = async () => {};
beforeAll(async () => {
  const api = createApiClient({
    baseUrl: upstream.url,
    apiKey: API_KEY,
    pathStyle: 'standard',
    timeoutMs: 2000,
  });
  const worker = await startSyncWorker(
    { db: database.handle.db, api, logger, tokens: testTokens, queue: q.queue, redis: q.redis, metrics },
    { redisUrl: inject('redisUrl'), prefix: q.prefix, concurrency: 2 },
  );
  stopWorker = async () => {
    await worker.close(5000);
    await api.close();
  };
});
afterAll(async () => {
  await stopWorker();
  await refreshQueue.close();
  await q.cleanup();
});

describe('the alerting pack', () => {
  it.skipIf(!promtool)('the rules pass their promtool unit tests (promtool test rules)', () => {
    const run = spawnSync('promtool', ['test', 'rules', 'cards-sync-rules.test.yml'], {
      cwd: `${DEPLOY}prometheus`,
      encoding: 'utf8',
    });
    expect(run.status, run.stdout + run.stderr).toBe(0);
    expect(run.stdout).toContain('SUCCESS');
    const check = spawnSync('promtool', ['check', 'rules', 'cards-sync-rules.yml'], {
      cwd: `${DEPLOY}prometheus`,
      encoding: 'utf8',
    });
    expect(check.status, check.stdout + check.stderr).toBe(0);
  });

  it.skipIf(!promtool)(
    'the compose Prometheus config is valid and loads the rules (promtool check config)',
    () => {
      const run = spawnSync('promtool', ['check', 'config', 'prometheus.yml'], {
        cwd: `${DEPLOY}prometheus`,
        encoding: 'utf8',
      });
      expect(run.status, run.stdout + run.stderr).toBe(0);
      expect(run.stdout + run.stderr).toMatch(/SUCCESS: \d+ rules found/);
    },
  );

  it('every metric the rules and the dashboard read is served by /metrics', async () => {
    const served = new Set(
      (await scrape())
        .split('\n')
        .filter((l) => l.startsWith('# TYPE '))
        .map((l) => l.split(' ')[2]!),
    );
    const used = new Set(
      [...`${rules}\n${dashboard}`.matchAll(/cards_sync_[a-z0-9_]+/g)].map((m) =>
        m[0].replace(/_(bucket|sum|count)$/, ''),
      ),
    );
    expect(used.size).toBeGreaterThan(10);
    for (const name of used) expect(served, `${name} is not served`).toContain(name);
    const parsed = JSON.parse(dashboard) as { panels: { targets: { expr: string }[] }[] };
    expect(parsed.panels.length).toBeGreaterThan(10);
  });

  it('the gauges say what the rules expect: workers, freshness, stale subscribers, a key rejected', async () => {
    const db = database.handle.db;
    await db.execute(sql`insert into subscribers (subscriber_id, last_success_at) values
      (1, now() - interval '10 minutes'), (2, now() - interval '3 days'), (3, null)`);
    let text = await scrape();
    expect(value(text, 'cards_sync_workers')).toBe(1);
    expect(value(text, 'cards_sync_subscribers_by_freshness{age="within_1h"}')).toBe(1);
    expect(value(text, 'cards_sync_subscribers_by_freshness{age="within_7d"}')).toBe(1);
    expect(value(text, 'cards_sync_subscribers_by_freshness{age="never"}')).toBe(1);
    expect(value(text, 'cards_sync_stale_subscribers')).toBe(2);
    const oldest = value(text, 'cards_sync_oldest_success_timestamp_seconds')!;
    expect(Math.abs(oldest - (Date.now() / 1000 - 3 * 86_400))).toBeLessThan(120);
    expect(value(text, 'cards_sync_queue_paused')).toBe(0);
    expect(value(text, 'cards_sync_api_key_rejected')).toBe(0);

    await pauseQueue(q.queue, q.redis, { by: 'auth_rejected', reason: 'API key rejected (401)' });
    text = await scrape();
    expect(value(text, 'cards_sync_queue_paused')).toBe(1);
    expect(value(text, 'cards_sync_api_key_rejected')).toBe(1);
    expect(
      Math.abs(value(text, 'cards_sync_queue_paused_since_timestamp_seconds')! - Date.now() / 1000),
    ).toBeLessThan(60);
    // Never a secret in what the metrics say.
    expect(text).not.toContain(API_KEY);
    expect(text).not.toContain(ADMIN_TOKEN);
  });
});
