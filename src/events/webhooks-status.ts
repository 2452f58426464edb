import type pg from 'pg';
import { listEndpoints } from './endpoints-sql.js';

// The `webhooks` block of `status --json` and the admin's scrape (DESIGN §6).

export interface WebhookStatus {
  id: number;
  /** Without its query string, which may carry the receiver's token. */
  url: string;
  enabled: boolean;
  /** Age in seconds of its oldest undelivered event; 0 when none waits. */
  lagSeconds: number;
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

/** One entry per endpoint; null on a database without the webhook tables (before migration 0027). */
export async function readWebhooksStatus(db: Pick<pg.Pool, 'query'>): Promise<WebhookStatus[] | null> {
  try {
    return (await listEndpoints(db)).map((e) => ({
      id: e.id,
      url: urlWithoutQuery(e.url),
      enabled: e.enabled,
      lagSeconds: e.lagSeconds,
      failing: e.failingSince !== null,
      deadLetters: e.deadLetters,
      disabledReason: e.enabled ? null : e.disabledReason,
    }));
  } catch (error) {
    if ((error as { code?: string }).code === '42P01') return null;
    throw error;
  }
}

/** The lines of `status`. */
export function formatWebhooks(entries: WebhookStatus[]): string[] {
  if (entries.length === 0) return [];
  return [
    `webhooks: ${entries.length} endpoint${entries.length === 1 ? '' : 's'}`,
    ...entries.map(
      (e) =>
        `  ${e.id} ${e.url}: ${e.enabled ? (e.failing ? 'FAILING' : 'ok') : 'disabled'}, lag ${e.lagSeconds}s, dead letters ${e.deadLetters}`,
    ),
  ];
}
