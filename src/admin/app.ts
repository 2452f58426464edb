import type { Server } from 'node:http';
import { serve } from '@hono/node-server';
import { sql } from 'drizzle-orm';
import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { z } from 'zod';
import type { Db } from '../../db/client.js';
import { freshnessBuckets, subscriberDetail } from '../../db/ops/admin.js';
import { lastRefreshRun } from '../../db/ops/refresh-runs.js';
import { readDataStatus } from '../../db/ops/status.js';
import { BULK_THRESHOLD } from '../../jobs/lanes.js';
import { type createSyncQueue, enqueueSyncs } from '../../jobs/queue.js';
import type { RedisClient } from '../../jobs/redis.js';
import type { createRefreshQueue } from '../../jobs/refresh.js';
import type { Target } from '../api/client.js';
import { queueStatusOf } from '../commands/status.js';
import type { Logger } from '../logger.js';
import type { Metrics } from '../metrics.js';
import { parseEmail, parseSubscriberId, TargetError } from '../targets.js';
import { requireToken } from './auth.js';
import { mountBoard } from './board.js';
import { csrfToken } from './csrf.js';
import { registerOpsRoutes } from './ops-routes.js';
import { parseFlash, renderOverview } from './overview.js';
import { collectGauges } from './scrape.js';

/** Largest request body, bytes. */
export const MAX_BODY_BYTES = 256 * 1024;
/** Most subscribers one resync request may name. */
export const MAX_RESYNC_ITEMS = 10_000;

export interface AdminDeps {
  db: Db;
  redis: RedisClient;
  syncQueue: ReturnType<typeof createSyncQueue>;
  refreshQueue: ReturnType<typeof createRefreshQueue>;
  metrics: Metrics;
  logger: Logger;
  /** `ADMIN_TOKEN`; without it the write routes, the dashboard and the overview are off. */
  adminToken: string | undefined;
  /** BullMQ prefix, for status. */
  prefix: string;
}

const resyncBody = z
  .object({
    subscriberIds: z.array(z.unknown()).max(MAX_RESYNC_ITEMS).optional(),
    emails: z.array(z.unknown()).max(MAX_RESYNC_ITEMS).optional(),
  })
  .strict();

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

/** The admin HTTP app: health, readiness, metrics, the dashboards and the resync API. */
export function createAdminApp(deps: AdminDeps) {
  const app = new Hono();
  const guard = requireToken(deps.adminToken);

  app.onError((error, c) => {
    deps.logger.error({ err: { message: error.message }, path: c.req.path }, 'admin request failed');
    return c.json({ error: 'internal error; see the server log' }, 500);
  });
  app.notFound((c) => c.json({ error: `no route ${c.req.method} ${c.req.path}` }, 404));
  app.use(
    '*',
    bodyLimit({
      maxSize: MAX_BODY_BYTES,
      onError: (c) => c.json({ error: `request body over ${MAX_BODY_BYTES} bytes` }, 413),
    }),
  );

  app.get('/healthz', (c) => c.json({ status: 'ok' }));

  app.get('/readyz', async (c) => {
    const [pg, redis] = await Promise.allSettled([
      withDeadline(deps.db.execute(sql`select 1`), 2000),
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

  app.post('/api/resync', guard, async (c) => {
    if (!(c.req.header('content-type') ?? '').toLowerCase().startsWith('application/json')) {
      return c.json({ error: 'send Content-Type: application/json' }, 415);
    }
    let raw: unknown;
    try {
      raw = await c.req.json();
    } catch {
      return c.json({ error: 'the body is not valid JSON' }, 400);
    }
    const parsed = resyncBody.safeParse(raw);
    if (!parsed.success) {
      return c.json(
        {
          error: `the body must be {"subscriberIds": [...], "emails": [...]} with at most ${MAX_RESYNC_ITEMS} items each`,
        },
        400,
      );
    }
    const targets: Target[] = [];
    const rejected: { field: string; index: number; reason: string }[] = [];
    const check = (field: string, items: unknown[] | undefined, parse: (v: unknown) => Target) => {
      for (const [index, v] of (items ?? []).entries()) {
        try {
          targets.push(parse(v));
        } catch (error) {
          if (!(error instanceof TargetError)) throw error;
          rejected.push({ field, index, reason: error.message });
        }
      }
    };
    check('subscriberIds', parsed.data.subscriberIds, (v) => {
      if (typeof v === 'number' && Number.isFinite(v)) return { subscriberId: parseSubscriberId(String(v)) };
      if (typeof v === 'string') return { subscriberId: parseSubscriberId(v) };
      throw new TargetError('a subscriber id must be a number or a string of digits');
    });
    check('emails', parsed.data.emails, (v) => {
      if (typeof v !== 'string') throw new TargetError('an e-mail must be a string');
      return { email: parseEmail(v) };
    });
    if (targets.length === 0 && rejected.length === 0) {
      return c.json({ error: 'name at least one subscriber in subscriberIds or emails' }, 400);
    }
    const lane = targets.length > BULK_THRESHOLD ? 'bulk' : 'ops';
    const { jobIds: _ids, ...counts } = await enqueueSyncs(deps.syncQueue, targets, 'api', { lane });
    const body = { ...counts, rejected: rejected.length, errors: rejected };
    // Like `cards-sync enqueue`: the valid ones are enqueued; any bad one makes it a 400.
    return c.json(body, rejected.length > 0 ? 400 : 202);
  });

  app.get('/api/subscribers/:id', guard, async (c) => {
    let id: number;
    try {
      id = parseSubscriberId(c.req.param('id'));
    } catch (error) {
      if (!(error instanceof TargetError)) throw error;
      return c.json({ error: error.message }, 400);
    }
    const detail = await subscriberDetail(deps.db, id);
    if (detail === undefined) return c.json({ error: `subscriber ${id} is not known` }, 404);
    return c.json(detail);
  });

  app.get('/admin', guard, async (c) => {
    const [queue, data, freshness, lastRefresh] = await Promise.all([
      queueStatusOf(deps.syncQueue, deps.redis, deps.prefix),
      readDataStatus(deps.db),
      freshnessBuckets(deps.db),
      lastRefreshRun(deps.db),
    ]);
    return c.html(
      renderOverview({
        queue,
        data,
        freshness,
        lastRefresh: lastRefresh ?? null,
        csrf: csrfToken(deps.adminToken ?? ''),
        flash: parseFlash(c.req.query()),
      }),
    );
  });

  registerOpsRoutes(app, deps);

  mountBoard(app, '/admin/queues', [deps.syncQueue, deps.refreshQueue], guard);

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
