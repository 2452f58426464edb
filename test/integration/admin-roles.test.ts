import { UnrecoverableError, Worker } from 'bullmq';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { adminActions, subscribers } from '../../db/schema/index.js';
import { createRedis } from '../../jobs/redis.js';
import { JOB_NAME, QUEUE_NAME } from '../../jobs/sync/queue.js';
import { READ_ONLY_REFUSAL } from '../../src/admin/auth.js';
import { csrfToken } from '../../src/admin/csrf.js';
import { type AppName, CSRF, READ_TOKEN, useAdminApp } from '../support/admin-client.js';
import { ADMIN_TOKEN } from '../support/fixtures.js';
import { useTestDatabase } from '../support/helpers.js';

// Who may do what on the admin server, route by route. The routes come from the app itself
// (Hono's `app.routes`: ours and Bull Board's), so a new route is in this table the day it is
// added: every route is tried with the operator token, the read token and none, on an app with both
// tokens, one with neither and one with only ADMIN_READ_TOKEN.

const database = useTestDatabase();
const admin = useAdminApp(database);
const { q, send } = admin;

const SUBSCRIBER = 7001;
/** A job that failed for good, for Bull Board's retry, clean and logs routes. */
const FAILED_JOB = 'roles-failed-job';
/** Health, readiness and metrics: open to anyone, as before; and the icon, which a browser asks for before any login. */
const PUBLIC = new Set(['GET /healthz', 'GET /readyz', 'GET /metrics', 'GET /favicon.ico']);

/** A value for each route parameter. A route with a parameter not listed here fails the test. */
const PARAMS: Record<string, string> = {
  id: String(SUBSCRIBER),
  queueName: QUEUE_NAME,
  jobId: FAILED_JOB,
  queueStatus: 'failed',
  schedulerId: 'roles-no-such-scheduler',
};

interface Route {
  method: string;
  /** The route as registered, e.g. `/api/subscribers/:id`. */
  pattern: string;
  /** A concrete path to request. */
  path: string;
}

/** A query for the routes that need one. */
const QUERIES: Record<string, string> = { '/admin/subscribers': `?q=${SUBSCRIBER}` };

function concrete(pattern: string): string {
  const path = pattern
    .replace(/:(\w+)/g, (_, name: string) => {
      const value = PARAMS[name];
      if (value === undefined) throw new Error(`admin-roles.test.ts: give a value for :${name} in PARAMS`);
      return value;
    })
    .replace(/\/\*$/, '/images/logo.svg');
  return `${path}${QUERIES[pattern] ?? ''}`;
}

/** Every route of the app with both tokens, once per method and path (middleware left out). */
function allRoutes(): Route[] {
  const seen = new Map<string, Route>();
  for (const r of admin.routes('on')) {
    if (r.method === 'ALL') continue;
    const key = `${r.method} ${r.path}`;
    if (!seen.has(key)) seen.set(key, { method: r.method, pattern: r.path, path: concrete(r.path) });
  }
  return [...seen.values()];
}

const key = (r: Route) => `${r.method} ${r.pattern}`;
const isWrite = (r: Route) => r.method !== 'GET';

/** A request as a browser or a script would send it to `r`, with a body that would act. */
function call(r: Route, token: string | null, app: AppName = 'on', headers: Record<string, string> = {}) {
  const form = r.pattern.startsWith('/admin/') && !r.pattern.startsWith('/admin/queues');
  const body =
    r.method === 'GET'
      ? undefined
      : form
        ? new URLSearchParams({ _csrf: CSRF, reason: 'roles test', email: 'someone@example.com' }).toString()
        : JSON.stringify(r.pattern === '/api/resync' ? { subscriberIds: [SUBSCRIBER] } : {});
  const type = form ? 'application/x-www-form-urlencoded' : 'application/json';
  return send(
    r.path,
    { token, app },
    {
      method: r.method,
      ...(body !== undefined ? { body, headers: { 'content-type': type, ...headers } } : { headers }),
    },
  );
}

/** Everything a refused request must leave alone. */
async function snapshot() {
  const failed = await q.queue.getJob(FAILED_JOB);
  const actions = await database.handle.db.select().from(adminActions);
  return {
    counts: await q.queue.getJobCounts('waiting', 'prioritized', 'delayed', 'active', 'failed', 'completed'),
    refresh: await admin.refreshQueue().getJobCounts('waiting', 'delayed', 'active', 'failed', 'completed'),
    paused: await q.queue.isPaused(),
    failedJob: failed ? { state: await failed.getState(), attempts: failed.attemptsMade } : null,
    actions: actions.length,
  };
}

beforeAll(async () => {
  await database.handle.db.insert(subscribers).values({ subscriberId: SUBSCRIBER, lastStatus: 'succeeded' });
  // One job fails for good under a short-lived worker; nothing else is on the queue.
  await q.queue.add(
    JOB_NAME,
    { target: { subscriberId: 7002 }, trigger: 'manual' },
    { jobId: FAILED_JOB, attempts: 1 },
  );
  const connection = createRedis(inject('redisUrl'), { blocking: true });
  const worker = new Worker(
    QUEUE_NAME,
    async () => {
      throw new UnrecoverableError('failed on purpose by admin-roles.test.ts');
    },
    { connection, prefix: q.prefix },
  );
  await new Promise<void>((resolve) => worker.on('failed', () => resolve()));
  await worker.close();
  connection.disconnect();
});

describe('the route table', () => {
  it('holds our routes and Bull Board’s, reads and writes', () => {
    const keys = allRoutes().map(key);
    for (const expected of [
      'GET /healthz',
      'GET /admin',
      'GET /api/subscribers/:id',
      'POST /api/resync',
      'GET /admin/subscribers',
      'GET /admin/subscribers/:id',
      'POST /admin/subscribers/:id/resync',
      'POST /admin/resync-email',
      'POST /admin/pause',
      'POST /admin/resume',
      'GET /admin/webhooks',
      'POST /admin/webhooks/:id/replay',
      'GET /admin/queues/api/queues',
      'PUT /admin/queues/api/queues/:queueName/:jobId/retry',
      'PUT /admin/queues/api/queues/:queueName/clean/:queueStatus',
    ]) {
      expect(keys).toContain(expected);
    }
    expect(allRoutes().filter(isWrite).length).toBeGreaterThan(20);
  });
});

describe('the read token may look', () => {
  it('every read answers the reader as it answers the operator; none answers 401, neither token 403', async () => {
    for (const r of allRoutes().filter((r) => !isWrite(r))) {
      const operator = await call(r, ADMIN_TOKEN);
      const reader = await call(r, READ_TOKEN);
      const readOnlyApp = await call(r, READ_TOKEN, 'read-only');
      const none = await call(r, null);
      const off = await call(r, ADMIN_TOKEN, 'off');
      if (PUBLIC.has(key(r))) {
        for (const res of [operator, reader, none, off]) expect(res.status, key(r)).toBe(200);
        continue;
      }
      // A search by id redirects to the subscriber's page; every other read answers 200.
      expect(operator.status, key(r)).toBe(r.pattern === '/admin/subscribers' ? 303 : 200);
      expect(reader.status, key(r)).toBe(operator.status);
      expect(readOnlyApp.status, key(r)).toBe(operator.status);
      expect(none.status, key(r)).toBe(401);
      expect(off.status, key(r)).toBe(403);
      expect(((await off.json()) as { error: string }).error, key(r)).toContain('set ADMIN_TOKEN');
      // The app with only ADMIN_READ_TOKEN knows no operator.
      expect((await call(r, ADMIN_TOKEN, 'read-only')).status, key(r)).toBe(401);
    }
  }, 60_000);
});

describe('but not act', () => {
  it('every write answers the reader 403 and changes nothing; none answers 401, neither token 403', async () => {
    const before = await snapshot();
    expect(before.failedJob).toEqual({ state: 'failed', attempts: 1 });
    const writes = allRoutes().filter(isWrite);
    for (const r of writes) {
      const reader = await call(r, READ_TOKEN);
      expect(reader.status, key(r)).toBe(403);
      expect(((await reader.json()) as { error: string }).error, key(r)).toContain(READ_ONLY_REFUSAL);
      const readOnlyApp = await call(r, READ_TOKEN, 'read-only');
      expect(readOnlyApp.status, key(r)).toBe(403);
      expect(((await readOnlyApp.json()) as { error: string }).error, key(r)).toContain(
        'ADMIN_TOKEN is not set',
      );
      expect((await call(r, null)).status, key(r)).toBe(401);
      expect((await call(r, ADMIN_TOKEN, 'read-only')).status, key(r)).toBe(401);
      expect((await call(r, ADMIN_TOKEN, 'off')).status, key(r)).toBe(403);
    }
    expect(await snapshot()).toEqual(before);
  }, 60_000);

  it('a browser posting a form as the reader gets a page that says so', async () => {
    const r = allRoutes().find((r) => key(r) === 'POST /admin/pause')!;
    const res = await call(r, READ_TOKEN, 'on', { accept: 'text/html,application/xhtml+xml' });
    expect(res.status).toBe(403);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await res.text();
    expect(html).toContain(READ_ONLY_REFUSAL);
    expect(html).toContain('Nothing was done');
    expect(await q.queue.isPaused()).toBe(false);
  });

  it("no CSRF value lets the reader act, and one derived from the read token does not pass the operator's forms", async () => {
    const readerCsrf = csrfToken(READ_TOKEN);
    for (const csrf of [CSRF, readerCsrf]) {
      const res = await admin.post('/admin/pause', { reason: 'reader tries' }, { token: READ_TOKEN, csrf });
      expect(res.status).toBe(403);
    }
    const operator = await admin.post('/admin/pause', { reason: 'wrong form' }, { csrf: readerCsrf });
    expect(operator.status).toBe(403);
    expect(await operator.text()).toContain('no valid _csrf field');
    expect(await q.queue.isPaused()).toBe(false);
  });
});

describe("the reader's pages", () => {
  it('show what the operator sees, without the forms that act, and with a note saying why', async () => {
    const pages = ['/admin', `/admin/subscribers/${SUBSCRIBER}`, '/admin/subscribers?q=nobody%40example.com'];
    for (const path of pages) {
      const operator = await (await admin.get(path)).text();
      const reader = await (await admin.get(path, { token: READ_TOKEN })).text();
      expect(operator, path).toMatch(/<form [^>]*method="post"/);
      expect(operator, path).toContain('name="_csrf"');
      expect(reader, path).not.toMatch(/<form [^>]*method="post"/);
      expect(reader, path).not.toContain('_csrf');
      expect(reader, path).toContain('Signed in with the read token: you may look but not');
      // The search still works for the reader: it only reads.
      expect(reader, path).toContain('<form id="search" method="get"');
    }
  });

  it("Bull Board's queues read as read-only for the reader and writable for the operator", async () => {
    type Queues = { queues: { name: string; readOnlyMode: boolean; allowRetries: boolean }[] };
    const list = async (token: string) =>
      ((await (await admin.get('/admin/queues/api/queues', { token })).json()) as Queues).queues;
    for (const queue of await list(READ_TOKEN)) {
      expect(queue).toMatchObject({ readOnlyMode: true, allowRetries: false });
    }
    for (const queue of await list(ADMIN_TOKEN)) {
      expect(queue).toMatchObject({ readOnlyMode: false, allowRetries: true });
    }
    const page = await admin.get('/admin/queues', { token: READ_TOKEN });
    expect(page.headers.get('content-security-policy')).toMatch(/^default-src 'self';/);
    expect(await page.text()).not.toMatch(/fonts\.googleapis/);
  });
});

describe('the operator may act', () => {
  it('on every write route: none is refused for its token', async () => {
    // Ours, with what each does; Bull Board's are only checked to pass the guard (some of them, such
    // as obliterate, fail on a queue in this state, which is Bull Board's answer, not a refusal).
    const ours: Record<string, number> = {
      'POST /api/resync': 202,
      'POST /admin/subscribers/:id/resync': 303,
      'POST /admin/resync-email': 303,
      'POST /admin/pause': 303,
      'POST /admin/resume': 303,
    };
    for (const r of allRoutes().filter(isWrite)) {
      const res = await call(r, ADMIN_TOKEN);
      if (ours[key(r)] !== undefined) expect(res.status, key(r)).toBe(ours[key(r)]);
      else expect([401, 403], key(r)).not.toContain(res.status);
    }
  }, 60_000);
});
