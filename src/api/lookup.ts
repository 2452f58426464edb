import type { SavedCard } from './schema.js';

// One lookup of the API: whom it names and every way it can end (client.ts makes the request).

/** Whom to look up: a subscriber id or an e-mail address. */
export type Target = { subscriberId: number } | { email: string };

/**
 * Every answer of the API as one typed outcome, one variant per row of docs/architecture.md. The client
 * never retries: the queue owns retries.
 */
export type FetchOutcome =
  | { kind: 'ok'; status: number; cards: SavedCard[]; durationMs: number }
  | { kind: 'not_found'; status: 404; durationMs: number }
  | { kind: 'auth_rejected'; status: 401 | 403; message: string; durationMs: number }
  | { kind: 'rate_limited'; status: 429; retryAfterMs: number; durationMs: number }
  | { kind: 'transient'; code: TransientCode; status?: number; message: string; durationMs: number }
  | { kind: 'rejected'; code: string; status: number; message: string; durationMs: number }
  | { kind: 'invalid_response'; status: number; message: string; durationMs: number };

type TransientCode = 'http_5xx' | 'timeout' | 'connection' | 'aborted';
