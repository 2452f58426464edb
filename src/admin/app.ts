import type { Server } from 'node:http';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { freshnessBuckets, readDataStatus } from '../../db/admin/index.js';
import { recentAdminActions } from '../../db/audit/index.js';
import { poolOf } from '../../db/client.js';
import { countDue, lastRefreshRun, readFreshness } from '../../db/refresh/index.js';
import { ping } from '../../db/server.js';
import { queueStatusOf, readLeaseHolder } from '../../jobs/refresh/index.js';
import { liveFleet } from '../fleet/index.js';
import { STALE_MODEL } from '../freshness/index.js';
import { continuousStatus, isContinuous } from '../status/index.js';
import { registerApiRoutes } from './api-routes.js';
import { type AdminEnv, requireToken } from './auth.js';
import { mountBoard } from './board.js';
import { registerChangesRoute } from './changes-route.js';
import { formToken } from './csrf.js';
import { type AdminDeps, maxAgeOf } from './deps.js';
import { registerOpsRoutes } from './ops-routes.js';
import { parseFlash, renderOverview } from './overview.js';
import { noFraming } from './same-origin.js';
import { collectGauges } from './scrape.js';
import { registerWebhooksRoutes } from './webhooks-routes.js';

/** Operator actions the overview lists. */
const RECENT_ACTIONS = 5;

/** Largest request body, bytes. */
const MAX_BODY_BYTES = 256 * 1024;

async function withDeadline<T>(what: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([what, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/** A payment card, as the pages' icon. */
const FAVICON =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect x="2" y="6" width="28" height="20" rx="3" fill="#2f5d8a"/><rect x="2" y="11" width="28" height="4" fill="#1b3550"/><rect x="6" y="19" width="9" height="3" rx="1" fill="#dfe8f1"/></svg>';

/** The admin HTTP app: health, readiness, metrics, the dashboards and the resync API. */
export function createAdminApp(deps: AdminDeps) {
  const app = new Hono<AdminEnv>();
  const guard = requireToken({ operator: deps.adminToken, reader: deps.adminReadToken });

  app.onError((error, c) => {
    deps.logger.error({ err: { message: error.message }, path: c.req.path }, 'admin request failed');
    return c.json({ error: 'internal error; see the server log' }, 500);
  });
  app.notFound((c) => c.json({ error: `no route ${c.req.method} ${c.req.path}` }, 404));
  app.use('*', noFraming());
  app.use(
    '*',
    bodyLimit({
      maxSize: MAX_BODY_BYTES,
      onError: (c) => c.json({ error: `request body over ${MAX_BODY_BYTES} bytes` }, 413),
    }),
  );

  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  // Every browser asks for one: a card, not a 404 in the log and the console of every page.
  app.get('/favicon.ico', (c) =>
    c.body(FAVICON, 200, { 'content-type': 'image/svg+xml', 'cache-control': 'public, max-age=86400' }),
  );

  app.get('/readyz', async (c) => {
    const [pg, redis] = await Promise.allSettled([
      withDeadline(ping(deps.db), 2000),
      withDeadline(deps.redis.ping(), 2000),
    ]);
    const checks = {
      postgres: pg.status === 'fulfilled' ? 'ok' : 'unreachable',
      redis: redis.status === 'fulfilled' ? 'ok' : 'unreachable',
    };
    const ready = checks.postgres === 'ok' && checks.redis === 'ok';
    return c.json({ status: ready ? 'ready' : 'not ready', ...checks }, ready ? 200 : 503);
  });

  app.get('/metrics', async (c) => {
    await collectGauges(deps);
    return c.body(await deps.metrics.registry.metrics(), 200, {
      'content-type': deps.metrics.registry.contentType,
    });
  });

  registerApiRoutes(app, deps);
  registerChangesRoute(app, deps);

  app.get('/admin', guard, async (c) => {
    const [queue, data, freshness, lastRefresh, actions, model, fleet] = await Promise.all([
      queueStatusOf(deps.syncQueue, deps.redis, deps.prefix),
      readDataStatus(deps.db),
      freshnessBuckets(deps.db),
      lastRefreshRun(deps.db),
      recentAdminActions(deps.db, RECENT_ACTIONS),
      // REFRESH_MAX_AGE as the plan recorded it, or this process's before there is one (as status reads it).
      readFreshness(poolOf(deps.db), maxAgeOf(deps), STALE_MODEL),
      liveFleet(poolOf(deps.db)).catch(() => []),
    ]);
    const continuous = isContinuous(queue, lastRefresh ?? null)
      ? continuousStatus({
          lastRefresh: lastRefresh ?? null,
          freshness: model,
          oldestSuccessAt: data.oldestSuccessAt,
          dueNow: await countDue(poolOf(deps.db)),
          leaseHolder: await readLeaseHolder(poolOf(deps.db), deps.redis, deps.prefix),
        })
      : null;
    return c.html(
      renderOverview({
        queue,
        data,
        freshness,
        model,
        fleet,
        lastRefresh: lastRefresh ?? null,
        continuous,
        recentActions: actions,
        csrf: formToken(c.get('role'), deps.adminToken),
        flash: parseFlash(c.req.query()),
      }),
    );
  });

  registerOpsRoutes(app, deps);
  registerWebhooksRoutes(app, deps);

  mountBoard(app, '/admin/queues', [deps.syncQueue, deps.refreshQueue], guard, deps);

  let server: Server | undefined;
  return {
    app,
    /** Listens on host:port; resolves with the URL. */
    async start(port: number, host: string): Promise<string> {
      return new Promise((resolve, reject) => {
        const s = serve({ fetch: app.fetch, port, hostname: host }, (info) => {
          resolve(`http://${host.includes(':') ? `[${host}]` : host}:${info.port}`);
        }) as Server;
        s.once('error', reject);
        server = s;
      });
    },
    async stop(): Promise<void> {
      const s = server;
      if (!s) return;
      s.closeAllConnections?.();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    },
  };
}
