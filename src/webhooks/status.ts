import type pg from 'pg';
import { type EndpointRow, listEndpoints } from '../../db/webhooks/index.js';

// The `webhooks` block of `status --json` and the admin's scrape (docs/monitoring.md).

/**
 * Past this share of `CHANGE_EVENTS_RETENTION_DAYS`, the oldest event waiting for an endpoint is
 * near the end of its retention: at 30 days, 24 days old, 6 days or more before its day's partition
 * is dropped, time enough to enable the endpoint (or replay from the feed) after a weekend. The
 * alert CardsSyncWebhookEventsNearRetention (deploy/prometheus) uses the same share.
 */
const NEAR_RETENTION_SHARE = 0.8;

/** `CHANGE_EVENTS_RETENTION_DAYS`'s default (src/config), for callers given no config. */
export const DEFAULT_RETENTION_DAYS = 30;

/** Whether the oldest event waiting for an endpoint is past {@link NEAR_RETENTION_SHARE} of the retention. */
export function nearRetention(lagSeconds: number, retentionDays: number): boolean {
  return lagSeconds > NEAR_RETENTION_SHARE * retentionDays * 86_400;
}

export interface WebhookStatus {
  id: number;
  /** Without its query string, which may carry the receiver's token. */
  url: string;
  enabled: boolean;
  /** Age in seconds of its oldest undelivered event, enabled or not; 0 when none waits. */
  lagSeconds: number;
  /** Events not delivered yet, enabled or not (counted up to 10,000 of each kind: `pendingCapped`). */
  pending: number;
  /** More events than `pending` may wait. */
  pendingCapped: boolean;
  /**
   * Its oldest waiting event is older than 80% of `CHANGE_EVENTS_RETENTION_DAYS`: the events not
   * taken from the feed yet (all of a disabled endpoint's) are dropped unseen at the retention.
   */
  nearRetention: boolean;
  /** No 2xx since its last failure. */
  failing: boolean;
  deadLetters: number;
  /** Why it is disabled (an operator's `webhooks disable`, or days without a 2xx); null while enabled. */
  disabledReason: string | null;
}

export function urlWithoutQuery(url: string): string {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}`;
  } catch {
    return '(unreadable URL)';
  }
}

/** One endpoint's entry. */
function webhookStatus(e: EndpointRow, retentionDays: number): WebhookStatus {
  return {
    id: e.id,
    url: urlWithoutQuery(e.url),
    enabled: e.enabled,
    lagSeconds: e.lagSeconds,
    pending: e.pending,
    pendingCapped: e.pendingCapped,
    nearRetention: nearRetention(e.lagSeconds, retentionDays),
    failing: e.failingSince !== null,
    deadLetters: e.deadLetters,
    disabledReason: e.enabled ? null : e.disabledReason,
  };
}

/**
 * One entry per endpoint; null on a database without the webhook tables (before migration 0027).
 * `retentionDays`: `CHANGE_EVENTS_RETENTION_DAYS`.
 */
export async function readWebhooksStatus(
  db: Pick<pg.Pool, 'query'>,
  retentionDays: number,
): Promise<WebhookStatus[] | null> {
  try {
    return (await listEndpoints(db)).map((e) => webhookStatus(e, retentionDays));
  } catch (error) {
    if ((error as { code?: string }).code === '42P01') return null;
    throw error;
  }
}

/** What still waited for an endpoint, for a person: `8 events (the oldest 45 s old)`. */
export function waitingText(w: { pending: number; pendingCapped: boolean; lagSeconds: number }): string {
  if (w.pending === 0) return 'nothing';
  const n = `${w.pending}${w.pendingCapped ? ' or more' : ''}`;
  return `${n} event${w.pending === 1 && !w.pendingCapped ? '' : 's'} (the oldest ${w.lagSeconds} s old)`;
}

/** `12`, or `10000+` when more may wait. */
export const pendingText = (e: { pending: number; pendingCapped: boolean }) =>
  `${e.pending}${e.pendingCapped ? '+' : ''}`;

/** What an operator reads when an endpoint's events near the retention: loud, and what to do. */
export function nearRetentionText(
  e: { id: number; enabled: boolean; lagSeconds: number },
  retentionDays: number,
): string {
  const days = (e.lagSeconds / 86_400).toFixed(1);
  const todo = e.enabled
    ? 'check that workers run and deliver to it (docs/runbooks.md#cardssyncwebhookeventsnearretention)'
    : `enable it before then (cards-sync webhooks enable ${e.id}), or remove it if nobody wants them (cards-sync webhooks remove ${e.id})`;
  return `EVENTS NEAR RETENTION: its oldest waiting event is ${days} days old, and events older than ${retentionDays} days (CHANGE_EVENTS_RETENTION_DAYS) are dropped unseen; ${todo}`;
}

/** The lines of `status`. */
export function formatWebhooks(entries: WebhookStatus[], retentionDays: number): string[] {
  if (entries.length === 0) return [];
  return [
    `webhooks: ${entries.length} endpoint${entries.length === 1 ? '' : 's'}`,
    ...entries.flatMap((e) => [
      `  ${e.id} ${e.url}: ${e.enabled ? (e.failing ? 'FAILING' : 'ok') : 'disabled'}, pending ${pendingText(e)}, lag ${e.lagSeconds}s, dead letters ${e.deadLetters}`,
      ...(e.nearRetention ? [`    ${nearRetentionText(e, retentionDays)}`] : []),
    ]),
  ];
}
