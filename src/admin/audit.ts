import type { Context } from 'hono';
import { routePath } from 'hono/route';
import type { Db } from '../../db/client.js';
import { auditAction } from '../audit/index.js';
import type { Logger } from '../logging/index.js';
import type { AdminEnv } from './auth.js';

/**
 * Writes the audit row of what a request did: the actor is the token's name, the source `http`,
 * and `detail` names the route (`POST /admin/pause`). A row that cannot be written is logged as a
 * warning; the action is done and answered as usual (see `auditAction`).
 */
export async function auditRequest(
  deps: { db: Db; logger: Logger },
  c: Context<AdminEnv>,
  action: string,
  detail: Record<string, unknown>,
): Promise<void> {
  const route = `${c.req.method} ${routePath(c)}`;
  const error = await auditAction(deps.db, {
    actor: c.get('role'),
    source: 'http',
    action,
    detail: { ...detail, route },
  });
  if (error !== undefined) {
    deps.logger.warn(
      { err: { message: error.message }, action, route },
      'the action was done, but its audit row (admin_actions) could not be written',
    );
  }
}
