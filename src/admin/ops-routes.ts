import type { Context, Hono } from 'hono';
import { latestRunId, loadSubscriberPage, lookupEmail, type PageRun } from '../../db/admin/index.js';
import { pauseProcessing, resumeProcessing } from '../../jobs/refresh/index.js';
import { type EnqueueCounts, requestSyncs } from '../../jobs/sync/index.js';
import type { Target } from '../api/index.js';
import { pauseDetail, resumeAudit } from '../audit/index.js';
import { parseEmail, parseSubscriberId, parseTarget, TargetError } from '../sync/index.js';
import { auditRequest } from './audit.js';
import { type AdminEnv, requireToken } from './auth.js';
import { formToken, readForm, requireForm } from './csrf.js';
import { type AdminDeps, maxAgeOf } from './deps.js';
import { messagePage } from './html.js';
import { isKnown, type ResyncState, renderSubscriberPage, renderUnknownEmail } from './subscriber-page.js';

/** Longest pause reason, characters. */
const MAX_REASON_LENGTH = 500;

/** A non-negative whole number from the query, or undefined. */
function queryCount(raw: string | undefined): number | undefined {
  if (raw === undefined || !/^\d{1,16}$/.test(raw)) return undefined;
  const n = Number(raw);
  return Number.isSafeInteger(n) ? n : undefined;
}

/** An enqueue's counts for the audit trail (not its job ids). */
const countsOf = ({ enqueued, alreadyQueued, promoted }: EnqueueCounts) => ({
  enqueued,
  alreadyQueued,
  promoted,
});

/** The query a re-sync returns to the page with: the run id to wait past, and when it was asked. */
function resyncQuery(since: number, counts: EnqueueCounts): string {
  return `since=${since}&requested=${Date.now()}${counts.enqueued === 0 ? '&already=1' : ''}`;
}

/** Why a pause reason is refused (trimmed, 1–500 characters, no control characters), or undefined. */
function reasonProblem(reason: string): string | undefined {
  if (reason === '') return 'give a reason: it tells whoever looks next why processing stopped';
  if (reason.length > MAX_REASON_LENGTH) return `the reason must be at most ${MAX_REASON_LENGTH} characters`;
  if (/\p{Cc}/u.test(reason)) return 'the reason must be one line without control characters';
  return undefined;
}

/** The re-sync state in a query, to carry from the e-mail search to the subscriber's page. */
function carriedQuery(c: Context): string {
  const carried = new URLSearchParams();
  for (const key of ['since', 'requested', 'already']) {
    const value = c.req.query(key);
    if (value !== undefined) carried.set(key, value);
  }
  const text = carried.toString();
  return text === '' ? '' : `?${text}`;
}

const badRequest = (c: Context, title: string, error: unknown) => {
  if (!(error instanceof TargetError)) throw error;
  return c.html(messagePage(title, error.message), 400);
};

/** The queue would not take the job: say why, change nothing (messagePage escapes the reason). */
const refusedPage = (c: Context, counts: EnqueueCounts) =>
  c.html(messagePage('Not enqueued', `${counts.refused[0]!.reason}. Nothing was enqueued.`), 400);

/**
 * The ops page's routes, behind the tokens: find a subscriber by id or e-mail, look at it, re-sync
 * it and watch the run land; pause and resume processing with a reason. The reader may look, not
 * post. Every form posts with a `_csrf` field (see csrf.ts), and every post that acts leaves an
 * audit row.
 */
export function registerOpsRoutes(app: Hono<AdminEnv>, deps: AdminDeps): void {
  const guard = requireToken({ operator: deps.adminToken, reader: deps.adminReadToken });
  const form = requireForm(deps.adminToken);
  // The reader's pages carry no forms.
  const csrf = (c: Context<AdminEnv>) => formToken(c.get('role'), deps.adminToken);

  /** The re-sync the page's query describes (`since`, `requested`, `already`), given its run if any. */
  async function resyncState(
    c: Context,
    since: number,
    run: PageRun | undefined,
    changed: Map<number, string>,
  ): Promise<ResyncState> {
    return {
      since,
      requestedAt: queryCount(c.req.query('requested')),
      alreadyQueued: c.req.query('already') === '1',
      run,
      changed,
      paused: await deps.syncQueue.isPaused(),
      now: Date.now(),
    };
  }

  app.get('/admin/subscribers', guard, async (c) => {
    const q = c.req.query('q') ?? '';
    let target: Target;
    try {
      if (q.trim() === '') throw new TargetError('type a subscriber id or an e-mail');
      target = parseTarget(q);
    } catch (error) {
      return badRequest(c, 'Not a subscriber id or e-mail', error);
    }
    // A re-sync of an e-mail comes back here: its state goes on to the subscriber's page.
    const carried = carriedQuery(c);
    if ('subscriberId' in target)
      return c.redirect(`/admin/subscribers/${target.subscriberId}${carried}`, 303);
    const since = queryCount(c.req.query('since'));
    const found = await lookupEmail(deps.db, target.email, since);
    if (found.subscriberId !== undefined) {
      return c.redirect(`/admin/subscribers/${found.subscriberId}${carried}`, 303);
    }
    const resync = since === undefined ? undefined : await resyncState(c, since, found.newRun, new Map());
    return c.html(
      renderUnknownEmail({ email: target.email, csrf: csrf(c), ...(resync ? { resync } : {}) }),
      404,
    );
  });

  app.get('/admin/subscribers/:id', guard, async (c) => {
    let id: number;
    try {
      id = parseSubscriberId(c.req.param('id'));
    } catch (error) {
      return badRequest(c, 'Not a subscriber id', error);
    }
    const since = queryCount(c.req.query('since'));
    const data = await loadSubscriberPage(deps.db, id, since);
    const resync = since === undefined ? undefined : await resyncState(c, since, data.newRun, data.changed);
    const html = renderSubscriberPage({
      subscriberId: id,
      data,
      csrf: csrf(c),
      ...(resync ? { resync } : {}),
    });
    return c.html(html, isKnown(data) ? 200 : 404);
  });

  app.post('/admin/subscribers/:id/resync', guard, form, async (c) => {
    let id: number;
    try {
      id = parseSubscriberId(c.req.param('id'));
    } catch (error) {
      return badRequest(c, 'Not a subscriber id', error);
    }
    // Read before enqueueing: a fast worker's run must land above it.
    const since = await latestRunId(deps.db, id);
    const counts = await requestSyncs(deps, [{ subscriberId: id }], {
      trigger: 'manual',
      lane: 'ops',
      refreshMaxAgeMs: maxAgeOf(deps),
    });
    if (counts.refused.length > 0) return refusedPage(c, counts);
    if (counts.registerError !== undefined)
      deps.logger.warn(
        { err: counts.registerError.message },
        'a new subscriber could not be recorded as known; enqueued all the same',
      );
    await auditRequest(deps, c, 'enqueue', {
      subscriberId: id,
      ...countsOf(counts),
      registered: counts.registered,
    });
    return c.redirect(`/admin/subscribers/${id}?${resyncQuery(since, counts)}`, 303);
  });

  app.post('/admin/resync-email', guard, form, async (c) => {
    let email: string;
    try {
      email = parseEmail((await readForm(c)).email ?? '');
    } catch (error) {
      return badRequest(c, 'Not an e-mail', error);
    }
    // The subscriber behind an unknown e-mail has no id yet: wait past the newest run of all.
    const since = await latestRunId(deps.db);
    const counts = await requestSyncs(deps, [{ email }], {
      trigger: 'manual',
      lane: 'ops',
      refreshMaxAgeMs: maxAgeOf(deps),
    });
    if (counts.refused.length > 0) return refusedPage(c, counts);
    // Not the e-mail itself: the audit trail keeps no addresses.
    await auditRequest(deps, c, 'enqueue', { emails: 1, ...countsOf(counts) });
    const q = encodeURIComponent(email);
    return c.redirect(`/admin/subscribers?q=${q}&${resyncQuery(since, counts)}`, 303);
  });

  app.post('/admin/pause', guard, form, async (c) => {
    const reason = ((await readForm(c)).reason ?? '').trim();
    const problem = reasonProblem(reason);
    if (problem !== undefined) return c.html(messagePage('Not paused', `${problem}. Nothing was done.`), 400);
    const outcome = await pauseProcessing(
      { syncQueue: deps.syncQueue, redis: deps.redis },
      reason,
      c.get('role'),
    );
    await auditRequest(deps, c, 'pause', pauseDetail(reason, outcome));
    return c.redirect(`/admin?done=${outcome.paused ? 'paused' : 'already-paused'}`, 303);
  });

  app.post('/admin/resume', guard, form, async (c) => {
    const outcome = await resumeProcessing({
      db: deps.db,
      syncQueue: deps.syncQueue,
      refreshQueue: deps.refreshQueue,
      redis: deps.redis,
    });
    const audit = resumeAudit(outcome);
    await auditRequest(deps, c, audit.action, audit.detail);
    const run = outcome.continuedRefreshRunId;
    const done = outcome.wasPaused || outcome.bulkLane.wasPaused ? 'resumed' : 'not-paused';
    return c.redirect(`/admin?done=${done}${run !== undefined ? `&run=${run}` : ''}`, 303);
  });
}
