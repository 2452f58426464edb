import type { Context, Hono } from 'hono';
import { poolOf } from '../../db/client.js';
import {
  listEndpoints,
  oldestDeadLetterAt,
  removeEndpoint,
  retryWaitingNow,
} from '../../db/webhooks/index.js';
import {
  DEFAULT_RETENTION_DAYS,
  feedCursorAt,
  listDeliveries,
  parseEndpointId,
  parseSince,
  replayEndpoint,
  urlWithoutQuery,
} from '../webhooks/index.js';
import { auditRequest } from './audit.js';
import { type AdminEnv, requireToken } from './auth.js';
import { formToken, readForm, requireForm } from './csrf.js';
import type { AdminDeps } from './deps.js';
import { messagePage } from './html.js';
import { type EndpointView, parseWebhooksFlash, renderWebhooksPage } from './webhooks-page.js';

/** Deliveries the page lists per endpoint, in each of its two tables. */
const SHOWN_DELIVERIES = 10;

const UNDEFINED_TABLE = '42P01';

/**
 * The webhooks view of the ops page, its replay form and its retry and remove buttons, with the data functions of
 * `status`, `webhooks list`, `webhooks deliveries`, `webhooks replay` and `webhooks remove`. The
 * reader may look; replay and remove are the operator's, behind the same CSRF and origin checks as
 * the other forms, and audited as `webhooks_replay`, `webhooks_retry` and `webhooks_remove` like the
 * commands'.
 */
export function registerWebhooksRoutes(app: Hono<AdminEnv>, deps: AdminDeps): void {
  const guard = requireToken({ operator: deps.adminToken, reader: deps.adminReadToken });
  const form = requireForm(deps.adminToken);
  const pool = poolOf(deps.db);

  async function readViews(): Promise<EndpointView[] | null> {
    let endpoints: Awaited<ReturnType<typeof listEndpoints>>;
    try {
      endpoints = await listEndpoints(pool);
    } catch (error) {
      if ((error as { code?: string }).code === UNDEFINED_TABLE) return null;
      throw error;
    }
    return Promise.all(
      endpoints.map(async (endpoint) => {
        const [latest, failed, oldestDeadAt] = await Promise.all([
          listDeliveries(pool, { endpointId: endpoint.id, failed: false, limit: SHOWN_DELIVERIES }),
          // Failed ones are dead or retrying: read more to show up to SHOWN_DELIVERIES dead.
          listDeliveries(pool, { endpointId: endpoint.id, failed: true, limit: 5 * SHOWN_DELIVERIES }),
          endpoint.deadLetters > 0 ? oldestDeadLetterAt(pool, endpoint.id) : Promise.resolve(null),
        ]);
        return {
          endpoint,
          latest,
          dead: failed.filter((d) => d.status === 'dead').slice(0, SHOWN_DELIVERIES),
          oldestDeadAt,
        };
      }),
    );
  }

  app.get('/admin/webhooks', guard, async (c) =>
    c.html(
      renderWebhooksPage({
        endpoints: await readViews(),
        csrf: formToken(c.get('role'), deps.adminToken),
        flash: parseWebhooksFlash(c.req.query()),
        retentionDays: deps.changeEventsRetentionDays ?? DEFAULT_RETENTION_DAYS,
      }),
    ),
  );

  app.post('/admin/webhooks/:id/replay', guard, form, async (c) => {
    const refuse = refusalOf(c);
    const target = endpointOfRoute(c);
    if ('refusal' in target) return target.refusal;
    const { id } = target;
    let since: ReturnType<typeof parseSince>;
    try {
      since = parseSince(((await readForm(c)).since ?? '').trim());
    } catch (error) {
      return refuse('Not a point to replay from', (error as Error).message.replace(/^--since/, 'since'), 400);
    }
    const cursor = 'cursor' in since ? since.cursor : await feedCursorAt(pool, since.time);
    const done = await replayEndpoint(pool, id, cursor);
    if (done === undefined) {
      return refuse(
        'No such endpoint',
        `there is no webhook endpoint ${id}; /admin/webhooks lists them`,
        404,
      );
    }
    await auditRequest(deps, c, 'webhooks_replay', {
      endpoint: id,
      from: done.from,
      to: done.to,
      replayed: done.replayed,
    });
    return c.redirect(
      `/admin/webhooks?done=replayed&endpoint=${id}&replayed=${done.replayed}#endpoint-${id}`,
      303,
    );
  });

  app.post('/admin/webhooks/:id/retry', guard, form, async (c) => {
    const refuse = refusalOf(c);
    const target = endpointOfRoute(c);
    if ('refusal' in target) return target.refusal;
    const { id } = target;
    const done = await retryWaitingNow(pool, id);
    if (done === undefined)
      return refuse(
        'No such endpoint',
        `there is no webhook endpoint ${id}; /admin/webhooks lists them`,
        404,
      );
    if ('disabled' in done)
      return refuse(
        'Endpoint disabled',
        `webhook endpoint ${id} is disabled; enable it to send what waited`,
        400,
      );
    await auditRequest(deps, c, 'webhooks_retry', { endpoint: id, retried: done.retried });
    return c.redirect(
      `/admin/webhooks?done=retried&endpoint=${id}&retried=${done.retried}#endpoint-${id}`,
      303,
    );
  });

  app.post('/admin/webhooks/:id/remove', guard, form, async (c) => {
    const refuse = refusalOf(c);
    const target = endpointOfRoute(c);
    if ('refusal' in target) return target.refusal;
    const { id } = target;
    if ((await readForm(c)).confirm !== 'yes') {
      return refuse(
        'Not confirmed',
        'tick the box that says what will not be sent, then press Remove endpoint again',
        400,
      );
    }
    const removal = await removeEndpoint(pool, id);
    if (removal === undefined || !removal.removed) {
      return refuse(
        'No such endpoint',
        removal === undefined
          ? `there is no webhook endpoint ${id}; /admin/webhooks lists them`
          : `webhook endpoint ${id} was removed already`,
        404,
      );
    }
    const w = removal.waiting;
    await auditRequest(deps, c, 'webhooks_remove', {
      endpoint: id,
      url: urlWithoutQuery(removal.url),
      pending: w.pending,
      pendingCapped: w.pendingCapped,
      lagSeconds: w.lagSeconds,
    });
    return c.redirect(
      `/admin/webhooks?done=removed&endpoint=${id}&pending=${w.pending}&capped=${w.pendingCapped ? 1 : 0}&lag=${w.lagSeconds}`,
      303,
    );
  });
}

/** A form's refusal page: why, and that nothing was done. */
function refusalOf(c: Context<AdminEnv>) {
  return (title: string, message: string, status: 400 | 404) =>
    c.html(messagePage(title, `${message}. Nothing was done.`), status);
}

/** The endpoint id of an `/admin/webhooks/:id/…` form's route, or the page refusing it (400). */
function endpointOfRoute(
  c: Context<AdminEnv>,
): { id: number } | { refusal: ReturnType<ReturnType<typeof refusalOf>> } {
  try {
    return { id: parseEndpointId(c.req.param('id') ?? '') };
  } catch (error) {
    return { refusal: refusalOf(c)('Not an endpoint id', (error as Error).message, 400) };
  }
}
