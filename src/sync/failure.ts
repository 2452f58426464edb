import type { Db } from '../../db/client.js';
import type { SyncStatus } from '../../db/schema/index.js';
import { insertSyncRun, recordSubscriberFailure } from '../../db/sync/index.js';
import type { Logger } from '../logging/index.js';
import { maskCardNumbers } from '../shared/index.js';
import type { RunBase } from './cards-to-apply.js';
import { emptyCounts, type SyncCounts } from './reconcile.js';
import type { SyncResult } from './result.js';

/** How a sync failed, as the ledger, the subscriber row, the log and the job's result tell it. */
export interface Failure {
  status: SyncStatus;
  subscriberId: number | null;
  errorCode: string;
  errorMessage: string;
  retryable: boolean;
  retryAfterMs?: number;
  /** Whether the failure counts against the subscriber (not for our own key or rate limit). Default true. */
  touchSubscriber?: boolean;
}

/** Records a sync that failed: its ledger row and, unless told not to, the subscriber's failure. */
export async function recordFailure(
  db: Db,
  log: () => Logger,
  base: RunBase,
  t0: number,
  failure: Failure,
): Promise<Omit<SyncResult, 'api'>> {
  // Postgres's clock at the fetch's start (RunBase.startedAt), and the time since by this host's
  // monotonic one: never this host's wall clock.
  const now = new Date(base.startedAt.getTime() + Math.max(0, performance.now() - t0));
  // Whatever built the message (a Content-Length quoted, a driver's error), no card number leaves
  // here for the ledger, the subscriber's row or the log.
  failure = { ...failure, errorMessage: maskCardNumbers(failure.errorMessage) };
  const syncRunId = await insertSyncRun(db, {
    ...base,
    subscriberId: failure.subscriberId,
    finishedAt: now,
    status: failure.status,
    errorCode: failure.errorCode,
    errorMessage: failure.errorMessage,
  });
  if (failure.subscriberId !== null && failure.touchSubscriber !== false) {
    await recordSubscriberFailure(db, {
      subscriberId: failure.subscriberId,
      status: failure.status,
      error: `${failure.errorCode}: ${failure.errorMessage}`,
      now,
    });
  }
  return finishFailure(log, t0, failure, syncRunId, emptyCounts());
}

/** Logs a recorded failure and makes its result. */
export function finishFailure(
  log: () => Logger,
  t0: number,
  failure: Failure,
  syncRunId: number,
  counts: SyncCounts,
): Omit<SyncResult, 'api'> {
  const durationMs = Math.round(performance.now() - t0);
  const level = failure.status === 'auth_rejected' ? 'error' : 'warn';
  log()[level](
    { subscriberId: failure.subscriberId, status: failure.status, errorCode: failure.errorCode, durationMs },
    `sync ${failure.status}: ${failure.errorMessage}`,
  );
  const result: Omit<SyncResult, 'api'> = {
    status: failure.status,
    subscriberId: failure.subscriberId,
    syncRunId,
    counts,
    errorCode: failure.errorCode,
    errorMessage: failure.errorMessage,
    retryable: failure.retryable,
    ...(failure.retryAfterMs !== undefined ? { retryAfterMs: failure.retryAfterMs } : {}),
    durationMs,
  };
  return result;
}
