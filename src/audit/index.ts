import { userInfo } from 'node:os';
import { type AdminAction, type AdminActionRow, recordAdminAction } from '../../db/audit/index.js';
import type { Executor } from '../../db/client.js';
import { formatTime } from '../shared/index.js';

// The audit trail (docs/analytics.md `admin_actions`): who runs a command, writing an action's row
// without failing the action, and how the rows are told in `audit` and on the ops page.

/** Who runs this CLI, for `admin_actions.actor`: the OS user (`USER` when the system cannot say). */
export function cliActor(env: Record<string, string | undefined> = process.env): string {
  try {
    return userInfo().username;
  } catch {
    return env.USER ?? env.LOGNAME ?? 'unknown';
  }
}

const EMAIL = /[^\s@<>()[\]"',;:]+@[^\s@<>()[\]"',;:]+\.[^\s@<>()[\]"',;:]+/g;

/** `detail` with anything shaped like an e-mail address replaced: a free-text reason may hold one. */
function withoutEmails(value: unknown): unknown {
  if (typeof value === 'string') return value.replace(EMAIL, '[e-mail]');
  if (Array.isArray(value)) return value.map(withoutEmails);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withoutEmails(v)]));
  }
  return value;
}

/**
 * Writes the audit row of an action already done; returns the error when the row could not be
 * written. The action stands either way: what it did cannot be taken back (jobs on the queue, a
 * paused queue), and pausing must work while Postgres is away. So the caller reports the action
 * as usual and warns that its row is missing.
 */
export async function auditAction(db: Executor, action: AdminAction): Promise<Error | undefined> {
  try {
    await recordAdminAction(db, {
      ...action,
      detail: withoutEmails(action.detail ?? {}) as Record<string, unknown>,
    });
    return undefined;
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  }
}

const valueText = (v: unknown): string =>
  typeof v === 'string' ? (/^[\w./-]+$/.test(v) ? v : JSON.stringify(v)) : JSON.stringify(v);

/** An action's detail in one short line for people: `enqueued=3 rejected=1 file=ids.txt`. */
export function summarizeDetail(detail: Record<string, unknown>, max = 120): string {
  // The route last: Postgres keeps jsonb keys shortest first, and the counts matter more.
  const entries = Object.entries(detail).sort(([a], [b]) => Number(a === 'route') - Number(b === 'route'));
  const text = entries
    .filter(([, v]) => v !== undefined && v !== null)
    .map(([k, v]) => `${k}=${valueText(v)}`)
    .join(' ');
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** One audit row for people: `2026-11-23 05:17:00Z  alice (cli)  pause  reason="…"`. */
export function describeAction(row: AdminActionRow): string {
  return `${formatTime(row.at)}  ${row.actor} (${row.source})  ${row.action}  ${summarizeDetail(row.detail)}`.trimEnd();
}

/** One audit row for scripts (`status --json`): the moment in ISO 8601. */
export function actionJson(row: AdminActionRow) {
  return {
    at: row.at.toISOString(),
    actor: row.actor,
    source: row.source,
    action: row.action,
    detail: row.detail,
  };
}

// What each action records, in one place, so that the CLI's rows and the admin server's agree.
// The outcomes are described here by what is recorded of them: this module knows no queue.

/** What a pause did, as far as the audit row says: on a queue already paused, the record it restated. */
export type PauseOutcome =
  | { paused: true }
  | {
      paused: false;
      already: { reason: string; by: string; actor?: string; rejectedKey?: unknown } | undefined;
    };

/** What a resume did, as far as the audit row says. */
export interface ResumeOutcome {
  wasPaused: boolean;
  endedPause: { reason: string; by: string; actor?: string; rejectedKey?: unknown } | undefined;
  continuedRefreshRunId: number | undefined;
  /** The bulk lane, paused by the mass-removal breaker: whether it was, and the held jobs sent on. */
  bulkLane?: { wasPaused: boolean; released: number };
}

/**
 * A pause's detail: the reason given; on a queue already paused, also the reason it replaced and
 * what paused the queue, and who (with a rejected key's process): each row says what it changed.
 */
export function pauseDetail(reason: string, outcome: PauseOutcome): Record<string, unknown> {
  if (outcome.paused) return { reason };
  const a = outcome.already;
  if (a === undefined) return { reason, alreadyPaused: true };
  return {
    reason,
    alreadyPaused: true,
    replacedReason: a.reason,
    pausedBy: a.by,
    ...(a.actor !== undefined ? { pausedByActor: a.actor } : {}),
    ...(a.rejectedKey !== undefined ? { rejectedKey: a.rejectedKey } : {}),
  };
}

/**
 * A resume's row: `refresh_resume` when it also continued a refresh run the breaker halted (the
 * breaker is off for the rest of that run), `resume` otherwise; with the reason of the pause it ended.
 */
export function resumeAudit(outcome: ResumeOutcome): { action: string; detail: Record<string, unknown> } {
  const detail: Record<string, unknown> = { wasPaused: outcome.wasPaused };
  if (outcome.endedPause !== undefined) {
    detail.endedPauseReason = outcome.endedPause.reason;
    detail.endedPauseBy = outcome.endedPause.by;
    if (outcome.endedPause.rejectedKey !== undefined)
      detail.endedPauseRejectedKey = outcome.endedPause.rejectedKey;
  }
  if (outcome.bulkLane?.wasPaused) {
    detail.bulkLaneResumed = true;
    detail.bulkJobsReleased = outcome.bulkLane.released;
  }
  if (outcome.continuedRefreshRunId === undefined) return { action: 'resume', detail };
  return { action: 'refresh_resume', detail: { ...detail, refreshRunId: outcome.continuedRefreshRunId } };
}
