import type { Hono } from 'hono';
import { z } from 'zod';
import { subscriberDetail } from '../../db/admin/index.js';
import { BULK_THRESHOLD, requestSyncs } from '../../jobs/sync/index.js';
import type { Target } from '../api/index.js';
import { parseEmail, parseSubscriberId, TargetError } from '../sync/index.js';
import { tracing } from '../tracing/index.js';
import { auditRequest } from './audit.js';
import type { AdminEnv } from './auth.js';
import { requireToken } from './auth.js';
import { type AdminDeps, maxAgeOf } from './deps.js';

/** Most subscribers one resync request may name. */
const MAX_RESYNC_ITEMS = 10_000;

const resyncBody = z
  .object({
    subscriberIds: z.array(z.unknown()).max(MAX_RESYNC_ITEMS).optional(),
    emails: z.array(z.unknown()).max(MAX_RESYNC_ITEMS).optional(),
  })
  .strict();

/** The JSON API, behind the tokens: re-sync subscribers (operator), read one subscriber (both). */
export function registerApiRoutes(app: Hono<AdminEnv>, deps: AdminDeps): void {
  const guard = requireToken({ operator: deps.adminToken, reader: deps.adminReadToken });

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
    const origins: { field: string; index: number }[] = [];
    const rejected: { field: string; index: number; reason: string }[] = [];
    const check = (field: string, items: unknown[] | undefined, parse: (v: unknown) => Target) => {
      for (const [index, v] of (items ?? []).entries()) {
        try {
          targets.push(parse(v));
          origins.push({ field, index });
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
    // A caller's `traceparent` makes the syncs part of its trace.
    const {
      jobIds: _ids,
      refused,
      registerError,
      registered,
      ...counts
    } = await tracing().inSpan('POST /api/resync', { kind: 'server', headers: c.req.header() }, () =>
      requestSyncs(deps, targets, { trigger: 'api', lane, refreshMaxAgeMs: maxAgeOf(deps) }),
    );
    // One the queue refused is reported like one that failed validation; the others went in.
    for (const r of refused) rejected.push({ ...origins[r.index]!, reason: r.reason });
    if (registerError !== undefined)
      deps.logger.warn(
        { err: registerError.message },
        'new subscribers could not be recorded as known; enqueued all the same',
      );
    // A request with nothing valid in it did nothing: no row, as for any refused request.
    if (targets.length > 0)
      await auditRequest(deps, c, 'enqueue', { ...counts, registered, rejected: rejected.length, lane });
    const body = { ...counts, registered, rejected: rejected.length, errors: rejected };
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
}
