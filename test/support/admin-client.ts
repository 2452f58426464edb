import { afterAll, beforeAll, expect } from 'vitest';
import type { DbHandle } from '../../db/client.js';
import { createRefreshQueue } from '../../jobs/refresh/index.js';
import { createAdminApp } from '../../src/admin/app.js';
import { csrfToken } from '../../src/admin/csrf.js';
import { createMetrics } from '../../src/metrics/index.js';
import { ADMIN_TOKEN } from './fixtures.js';
import { captureLogger } from './helpers.js';
import { testQueue } from './queue-helpers.js';

/** The `_csrf` value of the admin pages in tests. */
export const CSRF = csrfToken(ADMIN_TOKEN);
/** `ADMIN_READ_TOKEN` of the `on` and `read-only` apps. */
export const READ_TOKEN = 'test-read-token-8d2e6b31c4';

export type AppName = 'on' | 'off' | 'read-only';

export interface RequestOptions {
  /** The bearer token; null sends none. Default {@link ADMIN_TOKEN}. */
  token?: string | null;
  headers?: Record<string, string>;
  /**
   * `on` (the default): ADMIN_TOKEN and ADMIN_READ_TOKEN set; `off`: neither; `read-only`: only
   * ADMIN_READ_TOKEN.
   */
  app?: AppName;
}

/**
 * The admin app on the file's database and a queue of its own (no worker on it: jobs stay waiting),
 * and a client that speaks to it through `app.fetch` as the admin page's links and forms do.
 */
export function useAdminApp(database: { handle: DbHandle }) {
  const q = testQueue();
  const { logger, lines } = captureLogger();
  const apps = {} as Record<AppName, ReturnType<typeof createAdminApp>>;
  let refreshQueue: ReturnType<typeof createRefreshQueue>;
  beforeAll(() => {
    refreshQueue = createRefreshQueue(q.redis, q.prefix);
    const deps = {
      db: database.handle.db,
      redis: q.redis,
      syncQueue: q.queue,
      refreshQueue,
      metrics: createMetrics({ defaultMetrics: false }),
      logger,
      prefix: q.prefix,
    };
    apps.on = createAdminApp({ ...deps, adminToken: ADMIN_TOKEN, adminReadToken: READ_TOKEN });
    apps.off = createAdminApp({ ...deps, adminToken: undefined });
    apps['read-only'] = createAdminApp({ ...deps, adminToken: undefined, adminReadToken: READ_TOKEN });
  });
  afterAll(async () => {
    await refreshQueue?.close();
    await q.cleanup();
  });

  const send = (path: string, init: RequestOptions, extra: RequestInit = {}) => {
    const headers = new Headers(init.headers);
    if (init.token !== null) headers.set('authorization', `Bearer ${init.token ?? ADMIN_TOKEN}`);
    const method = (extra.method ?? 'GET').toUpperCase();
    if (method !== 'GET' && method !== 'HEAD') {
      // As the browser sends it from the server's own pages (src/admin/same-origin.ts); and Bull
      // Board's page script marks its writes as JSON (src/admin/board.ts).
      if (!headers.has('origin')) headers.set('origin', 'http://admin.test');
      if (!headers.has('sec-fetch-site')) headers.set('sec-fetch-site', 'same-origin');
      if (path.startsWith('/admin/queues') && !new Headers(extra.headers).has('content-type')) {
        headers.set('content-type', 'application/json');
      }
    }
    for (const [k, v] of new Headers(extra.headers)) headers.set(k, v);
    return apps[init.app ?? 'on'].app.fetch(new Request(`http://admin.test${path}`, { ...extra, headers }));
  };
  return {
    q,
    logger,
    lines,
    /** The app's routes as Hono lists them (`app.routes`). */
    routes: (app: AppName = 'on') => apps[app].app.routes,
    /** Any request: the method, headers and body of `extra`, the token and app of `init`. */
    send,
    get: (path: string, init: RequestOptions = {}) => send(path, init),
    /** Posts a form as the admin page does: urlencoded, with `_csrf` unless told otherwise. */
    post: (
      path: string,
      fields: Record<string, string> = {},
      init: RequestOptions & { csrf?: string | null; contentType?: string } = {},
    ) => {
      const body = new URLSearchParams(fields);
      if (init.csrf !== null) body.set('_csrf', init.csrf ?? CSRF);
      const contentType = init.contentType ?? 'application/x-www-form-urlencoded';
      return send(path, init, {
        method: 'POST',
        body: body.toString(),
        headers: { 'content-type': contentType },
      });
    },
    refreshQueue: () => refreshQueue,
    /** Asserts that no sync job waits on the queue. */
    async nothingQueued() {
      const c = await q.queue.getJobCounts('waiting', 'prioritized');
      expect((c.waiting ?? 0) + (c.prioritized ?? 0)).toBe(0);
    },
  };
}
