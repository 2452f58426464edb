import type { Hono } from 'hono';
import { poolOf } from '../../db/client.js';
import {
  CursorAheadError,
  checkCursor,
  createChangeSignal,
  FeedParamError,
  parseFeedParams,
  pollFeed,
} from '../events/index.js';
import type { AdminEnv } from './auth.js';
import { requireToken } from './auth.js';
import type { AdminDeps } from './deps.js';

/**
 * `GET /api/changes?after=CURSOR&limit=N&wait=SECONDS` (operator or read token): a page of change
 * events after the cursor, `{"events": [...], "next": CURSOR}` (docs/events.md). With `wait`, an empty
 * page is held until an event commits or the wait ends. A cursor beyond the feed's head is refused
 * (400, `{"error", "head"}`).
 */
export function registerChangesRoute(app: Hono<AdminEnv>, deps: AdminDeps): void {
  const guard = requireToken({ operator: deps.adminToken, reader: deps.adminReadToken });
  const signal = createChangeSignal(poolOf(deps.db));
  app.get('/api/changes', guard, async (c) => {
    let params: ReturnType<typeof parseFeedParams>;
    try {
      params = parseFeedParams({
        after: c.req.query('after'),
        limit: c.req.query('limit'),
        wait: c.req.query('wait'),
      });
    } catch (error) {
      if (!(error instanceof FeedParamError)) throw error;
      return c.json({ error: error.message }, 400);
    }
    try {
      await checkCursor(poolOf(deps.db), params.after);
    } catch (error) {
      if (!(error instanceof CursorAheadError)) throw error;
      return c.json({ error: error.message, head: error.head }, 400);
    }
    const page = await pollFeed(poolOf(deps.db), signal, { ...params, abort: c.req.raw.signal });
    return c.json(page, 200, { 'cache-control': 'no-store' });
  });
}
