import type { SyncStatus, SyncTrigger } from '../../db/schema/index.js';
import type { SavedCard } from '../../db/sync/index.js';
import type { SyncCounts } from './reconcile.js';

// One validated answer on its way to Postgres, and what writing it came to (apply-cards.ts writes).

/** The `sync_runs` columns known before the answer is written. */
export interface RunBase {
  email: string | null;
  trigger: SyncTrigger;
  jobId: string | null;
  refreshRunId: number | null;
  /**
   * When the fetch started, by Postgres's clock (db/sync/clock.ts): an answer fetched before a
   * newer applied one is not written.
   */
  startedAt: Date;
}

/** One validated answer, ready to be written. */
export interface CardsToApply {
  /** Whose answer it is; null only for an unknown e-mail answered with no cards. */
  subscriberId: number | null;
  /** Set when the lookup was by e-mail. */
  email?: string | undefined;
  cards: readonly SavedCard[];
  run: RunBase;
  /** While tracing is on and its trace sampled: its sync's trace context, which its events carry. */
  spanContext?: string | undefined;
}

export interface AppliedCards {
  status: Extract<SyncStatus, 'succeeded' | 'superseded'>;
  subscriberId: number | null;
  syncRunId: number;
  counts: SyncCounts;
}

/** The advisory-lock key of an answer: its subscriber, or the e-mail when nobody is known. */
export function lockKey(item: CardsToApply): number | string {
  return item.subscriberId ?? `email:${item.email?.toLowerCase() ?? ''}`;
}
