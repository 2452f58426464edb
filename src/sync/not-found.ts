import type { Db } from '../../db/client.js';
import { recordNotFound } from '../../db/sync/index.js';
import { tracing } from '../tracing/index.js';
import type { RunBase } from './cards-to-apply.js';
import { emptyCounts, type SyncCounts } from './reconcile.js';

/** `SYNC_GONE_AFTER_NOT_FOUND`'s default. */
export const DEFAULT_GONE_AFTER_NOT_FOUND = 3;

const MESSAGE = 'the API does not know this subscriber (HTTP 404)';

export interface NotFoundResult {
  syncRunId: number;
  /** `removed`: the active cards this answer marked removed. */
  counts: SyncCounts;
  /** Says so when cards were removed. */
  errorMessage: string;
}

/**
 * A 404: records the `not_found` run and, after `goneAfter` of them in a row (0 = never), marks
 * the subscriber's active cards removed, all in one transaction (see `db/sync/not-found.ts`).
 */
export async function applyNotFound(
  db: Db,
  base: RunBase,
  subscriberId: number | null,
  goneAfter: number,
  /** By Postgres's clock: the fetch's start (RunBase.startedAt) and the time since. */
  finishedAt: Date,
  /** `CHANGE_EVENTS=on`: the cards it marks removed are also change events. */
  changeEvents: boolean,
): Promise<NotFoundResult> {
  const recorded = await recordNotFound(db, {
    run: {
      ...base,
      finishedAt,
      status: 'not_found',
      errorCode: 'not_found',
      errorMessage: MESSAGE,
    },
    subscriberId,
    error: `not_found: ${MESSAGE}`,
    goneAfter,
    changeEvents,
    // The job's span: the events of the cards it removes link their deliveries to it.
    spanContext: tracing().contextText(tracing().current()?.context()),
  });
  const errorMessage =
    recorded.removed > 0
      ? `${MESSAGE}; ${recorded.consecutiveNotFound} in a row (SYNC_GONE_AFTER_NOT_FOUND ${goneAfter}): ` +
        `its ${recorded.removed} active cards were marked removed`
      : MESSAGE;
  return {
    syncRunId: recorded.syncRunId,
    counts: { ...emptyCounts(), removed: recorded.removed },
    errorMessage,
  };
}
