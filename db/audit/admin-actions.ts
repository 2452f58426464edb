import { desc } from 'drizzle-orm';
import type { Executor } from '../client.js';
import { type AdminSource, adminActions } from '../schema/index.js';

// The audit trail (docs/analytics.md `admin_actions`): who did what, from the CLI or HTTP. Rows are kept;
// `detail` holds counts, ids and reasons, never a secret.

export interface AdminAction {
  /** The token's name over HTTP (`operator`, `reader`); the OS user on the CLI. */
  actor: string;
  source: AdminSource;
  /** `enqueue`, `pause`, `resume`, `refresh`, `refresh_resume`, `tokens_rotate`, `token_read`… */
  action: string;
  detail?: Record<string, unknown>;
}

export type AdminActionRow = typeof adminActions.$inferSelect;

/** Writes one audit row; returns its id. */
export async function recordAdminAction(db: Executor, action: AdminAction): Promise<number> {
  const [row] = await db
    .insert(adminActions)
    .values({
      actor: action.actor,
      source: action.source,
      action: action.action,
      detail: action.detail ?? {},
    })
    .returning({ id: adminActions.id });
  return row!.id;
}

/** The newest `limit` actions, newest first. */
export async function recentAdminActions(db: Executor, limit = 5): Promise<AdminActionRow[]> {
  return db.select().from(adminActions).orderBy(desc(adminActions.id)).limit(limit);
}
