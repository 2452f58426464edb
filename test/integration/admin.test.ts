import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createDb } from '../../db/client.js';
import { subscribers } from '../../db/schema/index.js';
import { createRedis } from '../../jobs/redis.js';
import { createRefreshQueue } from '../../jobs/refresh/index.js';
import { enqueueSyncs, startSyncWorker } from '../../jobs/sync/index.js';
import { createAdminApp } from '../../src/admin/app.js';
import { createApiClient } from '../../src/api/index.js';
import { createMetrics } from '../../src/metrics/index.js';
import { ADMIN_TOKEN, API_KEY, makeCard, ok, testTokens, useScriptedApi } from '../support/fixtures.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';
import { testQueue, waitFor } from '../support/queue-helpers.js';

const TOKEN = ADMIN_TOKEN;
const database = useTestDatabase();
const upstream = useScriptedApi();
const { logger, lines } = captureLogger();
const q = testQueue();
const metrics = createMetrics({ defaultMetrics: false });
let admin: ReturnType<typeof createAdminApp>;
let refreshQueue: ReturnType<typeof createRefreshQueue>;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(() => {
  refreshQueue = createRefreshQueue(q.redis, q.prefix);
  admin = createAdminApp({
    db: database.handle.db,
    redis: q.redis,
    syncQueue: q.queue,
    refreshQueue,
    metrics,
    logger,
    adminToken: TOKEN,
    prefix: q.prefix,
  });
});
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
  await refreshQueue.close();
  await q.cleanup();
});

const call = (path: string, init: RequestInit & { token?: string | null } = {}) => {
  const headers = new Headers(init.headers);
  if (init.token !== null) headers.set('authorization', `Bearer ${init.token ?? TOKEN}`);
  return admin.app.fetch(new Request(`http://admin.test${path}`, { ...init, headers }));
};
const resync = (body: unknown, init: { token?: string | null; contentType?: string } = {}) =>
  call('/api/resync', {
    method: 'POST',
    body: typeof body === 'string' ? body : JSON.stringify(body),
    headers: { 'content-type': init.contentType ?? 'application/json' },
    ...(init.token !== undefined ? { token: init.token } : {}),
  });

describe('health and readiness', () => {
  it('/healthz answers without a token', async () => {
    const res = await call('/healthz', { token: null });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ok' });
  });

  it('/favicon.ico is an icon, not a 404 on every page a browser opens', async () => {
    const res = await call('/favicon.ico', { token: null });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/svg+xml');
    expect(await res.text()).toMatch(/^<svg /);
  });

  it('/readyz is 200 when Postgres and Redis answer, 503 naming the one that does not', async () => {
    expect((await call('/readyz', { token: null })).status).toBe(200);
    const deadDb = createDb('postgres://postgres@127.0.0.1:1/none', { max: 1 });
    const deadRedis = createRedis('redis://127.0.0.1:1');
    cleanups.push(async () => {
      deadRedis.disconnect();
      await deadDb.close();
    });
    const broken = createAdminApp({
      db: deadDb.db,
      redis: deadRedis,
      syncQueue: q.queue,
      refreshQueue,
      metrics,
      logger,
      adminToken: TOKEN,
      prefix: q.prefix,
    });
    const res = await broken.app.fetch(new Request('http://admin.test/readyz'));
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ postgres: 'unreachable', redis: 'unreachable' });
  });
});

describe('authentication', () => {
  it('write routes, the dashboard and the overview are off without ADMIN_TOKEN', async () => {
    const off = createAdminApp({
      db: database.handle.db,
      redis: q.redis,
      syncQueue: q.queue,
      refreshQueue,
      metrics,
      logger,
      adminToken: undefined,
      prefix: q.prefix,
    });
    for (const [method, path] of [
      ['POST', '/api/resync'],
      ['GET', '/admin'],
      ['GET', '/admin/queues'],
      ['GET', '/api/subscribers/1'],
    ] as const) {
      const res = await off.app.fetch(new Request(`http://admin.test${path}`, { method }));
      expect(res.status, path).toBe(403);
      expect(((await res.json()) as { error: string }).error).toContain('ADMIN_TOKEN');
    }
  });

  it('refuses a missing or wrong token, accepts bearer and basic auth', async () => {
    expect((await call('/admin', { token: null })).status).toBe(401);
    const wrong = await call('/admin', { token: `${TOKEN}x` });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('www-authenticate')).toContain('Basic');
    expect(await wrong.text()).not.toContain(TOKEN);
    expect((await call('/admin')).status).toBe(200);
    const basic = Buffer.from(`ops:${TOKEN}`).toString('base64');
    expect((await call('/admin', { token: null, headers: { authorization: `Basic ${basic}` } })).status).toBe(
      200,
    );
    expect((await call('/admin/queues')).status).toBe(200);
    expect((await call('/admin/queues', { token: 'nope-nope-nope-nope' })).status).toBe(401);
  });

  it('serves the jobs dashboard with one inline script, no other origin, and a CSP on every response', async () => {
    for (const path of ['/admin/queues', '/admin/queues/queue/saved-cards-sync']) {
      const res = await call(path);
      expect(res.status, path).toBe(200);
      const html = await res.text();
      expect(html.match(/<script>/g), path).toHaveLength(1);
      expect(html, path).not.toMatch(/(?:href|src)=["']?(?:https?:)?\/\//);
      expect(res.headers.get('content-security-policy'), path).toMatch(
        /^default-src 'self'; script-src 'self' 'sha256-[A-Za-z0-9+/]+=*';/,
      );
    }
    for (const [path, token] of [
      ['/admin/queues/api/queues', undefined],
      ['/admin/queues/static/images/logo.svg', undefined],
      ['/admin/queues', null],
    ] as const) {
      const res = await call(path, { token });
      expect(res.headers.get('content-security-policy'), path).toMatch(/^default-src 'self';/);
    }
  });
});

describe('POST /api/resync', () => {
  // The ids these requests named became known subscribers; the overview's tests count their own.
  afterAll(async () => {
    await database.handle.pool.query('delete from subscribers where last_synced_at is null');
  });
  it('enqueues valid ids and e-mails with trigger api, deduplicated, and answers counts', async () => {
    const res = await resync({ subscriberIds: [101, '102', 101], emails: ['ayse+1@example.com'] });
    expect(res.status).toBe(202);
    // 101 and 102 were not known: they are now, as never synced (101 named twice counts once).
    expect(await res.json()).toEqual({
      enqueued: 3,
      alreadyQueued: 1,
      promoted: 0,
      registered: 2,
      rejected: 0,
      errors: [],
    });
    const jobs = await q.queue.getJobs(['waiting']);
    expect(jobs.map((j) => j.data.trigger)).toEqual(['api', 'api', 'api']);
    const known = await database.handle.pool.query(
      'select subscriber_id from subscribers where subscriber_id in (101, 102) and last_success_at is null order by 1',
    );
    expect(known.rows.map((r) => Number(r.subscriber_id))).toEqual([101, 102]);
    await q.queue.drain();
  });

  it('lists each bad item and why (400), enqueues the rest, stores nothing of the bad ones', async () => {
    const hostile = [
      '1; drop table saved_cards;--',
      "' or 1=1 --",
      '<script>alert(1)</script>@x.com',
      1.5,
      -3,
      2 ** 53,
      null,
    ];
    const res = await resync({
      subscriberIds: [201, ...hostile],
      emails: ["robert'); drop table subscribers;--@x.com", 'ok@example.com'],
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { enqueued: number; errors: { field: string; index: number }[] };
    expect(body.enqueued).toBe(2);
    expect(body.errors.map((e: { field: string; index: number }) => `${e.field}[${e.index}]`)).toEqual([
      'subscriberIds[1]',
      'subscriberIds[2]',
      'subscriberIds[3]',
      'subscriberIds[4]',
      'subscriberIds[5]',
      'subscriberIds[6]',
      'subscriberIds[7]',
      'emails[0]',
    ]);
    const tables = await database.handle.db.execute<{ n: number }>(
      sql`select count(*)::int as n from information_schema.tables where table_name in ('saved_cards', 'subscribers')`,
    );
    expect(tables.rows[0]!.n).toBe(2);
    await q.queue.drain();
  });

  it.each([
    ['not JSON', '{"subscriberIds": [1,', 'application/json', 400],
    ['the wrong content type', '{"subscriberIds": [1]}', 'text/plain', 415],
    ['an unknown key', '{"subscriberIds": [1], "all": true}', 'application/json', 400],
    ['ids that are not an array', '{"subscriberIds": 1}', 'application/json', 400],
    ['an empty request', '{}', 'application/json', 400],
    ['a JSON array', '[1,2]', 'application/json', 400],
  ])('refuses %s, enqueueing nothing', async (_name, body, contentType, status) => {
    const res = await resync(body, { contentType });
    expect(res.status).toBe(status);
    const json = (await res.json()) as { error: unknown };
    expect(typeof json.error).toBe('string');
    expect(JSON.stringify(json)).not.toMatch(/at .*\.(ts|js):\d+/);
    expect((await q.queue.getJobCounts('waiting')).waiting).toBe(0);
  });

  it('refuses an oversized body', async () => {
    const res = await resync({ emails: Array.from({ length: 20_000 }, (_, i) => `user${i}@example.com`) });
    expect(res.status).toBe(413);
    expect((await q.queue.getJobCounts('waiting')).waiting).toBe(0);
  });

  it('refuses without a token, enqueueing nothing', async () => {
    expect((await resync({ subscriberIds: [1] }, { token: null })).status).toBe(401);
    expect((await q.queue.getJobCounts('waiting')).waiting).toBe(0);
  });
});

describe('GET /api/subscribers/:id and metrics', () => {
  it('shows freshness, active cards and last runs, never a token; metrics count the sync', async () => {
    const card = makeCard(301, { cardToken: 'cafebabe'.repeat(4) });
    upstream.script.set('id:301', ok([card]));
    const api = createApiClient({
      baseUrl: upstream.url,
      apiKey: API_KEY,
      pathStyle: 'standard',
      timeoutMs: 2000,
    });
    cleanups.push(() => api.close());
    const worker = await startSyncWorker(
      { db: database.handle.db, api, logger, tokens: testTokens, queue: q.queue, redis: q.redis, metrics },
      { redisUrl: inject('redisUrl'), prefix: q.prefix, concurrency: 2 },
    );
    cleanups.push(() => worker.close(5000));
    await enqueueSyncs(q.queue, [{ subscriberId: 301 }], 'api');
    await waitFor('the sync', async () => ((await q.queue.getJobCounts('completed')).completed ?? 0) >= 1);

    const res = await call('/api/subscribers/301');
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).not.toContain('cafebabe');
    const body = JSON.parse(text);
    expect(body.subscriber).toMatchObject({ subscriberId: 301, activeCards: 1, lastStatus: 'succeeded' });
    expect(body.lastRuns[0]).toMatchObject({ status: 'succeeded', trigger: 'api', inserted: 1 });

    expect((await call('/api/subscribers/999999')).status).toBe(404);
    expect((await call('/api/subscribers/abc')).status).toBe(400);
    expect((await call('/api/subscribers/1%27%20or%201=1')).status).toBe(400);

    const metricsText = await (await call('/metrics', { token: null })).text();
    expect(metricsText).toMatch(/cards_sync_sync_outcomes_total\{status="succeeded"\} 1/);
    expect(metricsText).toMatch(/cards_sync_api_requests_total\{code="200"\} 1/);
    expect(metricsText).toMatch(/cards_sync_cards_total\{change="inserted"\} 1/);
    expect(metricsText).toMatch(/cards_sync_jobs\{state="completed"\} 1/);
    expect(metricsText).toContain('cards_sync_api_request_duration_seconds_bucket');
    expect(metricsText).toContain('cards_sync_last_refresh_success_timestamp_seconds');
    expect(metricsText).not.toContain(API_KEY);
  });

  it('the overview shows the queue and a freshness chart from real subscribers', async () => {
    const now = Date.now();
    await database.handle.db.insert(subscribers).values([
      { subscriberId: 401, lastSuccessAt: new Date(now - 10 * 60_000) },
      { subscriberId: 402, lastSuccessAt: new Date(now - 3 * 86_400_000) },
      { subscriberId: 403, lastSuccessAt: new Date(now - 30 * 86_400_000) },
      { subscriberId: 404, lastSuccessAt: null },
    ]);
    const html = await (await call('/admin')).text();
    expect(html).toContain('id="queue-state">running');
    expect(html).toMatch(/data-bucket="within 1 h" data-count="2"/); // 301 and 401
    expect(html).toMatch(/data-bucket="1 – 7 days" data-count="1"/);
    expect(html).toMatch(/data-bucket="older" data-count="1"/);
    expect(html).toMatch(/data-bucket="never" data-count="1"/);
    expect(lines.join('\n')).not.toContain(TOKEN);
  });
});
