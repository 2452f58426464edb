import type { SyncStatus } from '../../db/schema/index.js';
import type { SyncCounts } from './reconcile.js';

// What one sync returns: its own module because the sync and its failure paths both build it.

/** How one sync ended; small enough to be a job's return value. */
export interface SyncResult {
  status: SyncStatus;
  subscriberId: number | null;
  syncRunId: number;
  counts: SyncCounts;
  /** Stable code of a failure: `not_found`, `invalid_response`, `http_5xx`, `timeout`, `connection`, `http_4xx`… */
  errorCode?: string;
  /** Redacted message: never a token, key or card number. */
  errorMessage?: string;
  /** True when the failure is transient and an attempt may be retried. */
  retryable: boolean;
  /** For `rate_limited`: how long every worker should wait, ms. */
  retryAfterMs?: number;
  durationMs: number;
  /** The API's answer: HTTP status, or `timeout` / `connection` / `aborted` when there was none. */
  api: { code: string; durationMs: number };
}
