import type { Freshness, LeaseHolder, RefreshRun } from '../../db/refresh/index.js';
import type { QueueStatus } from '../../jobs/refresh/index.js';

// What `status` and the overview tell of the refresh from what they read: how far the stale
// estimate can be trusted, and what REFRESH_MODE=continuous is doing, in its own terms: a window (a
// refresh run) spends a request budget, so its figures are requests spent of that budget, not
// "subscribers done" with an ETA; what matters beside it is who is due now and how old the oldest
// copy is. `status`, `status --json` and the overview read this one shape.

const pct = (x: number) => `${(x * 100).toFixed(2)}%`;

/**
 * What the stale estimate covers and how sure it is, in one sentence: its interval if every rate is
 * right, and how many subscribers it knows by their own syncs, by the population's rate alone
 * (synced once) or not at all (never synced: stale for sure). `status` and the overview say this.
 */
export function estimateBasis(f: Pick<Freshness, 'estimate'>): string {
  const e = f.estimate;
  return (
    `the estimate's 95% interval if the rates are right: ${pct(e.low)} – ${pct(e.high)}; it covers ${e.covers} subscribers: ` +
    `${e.learned} by their own syncs, ${e.syncedOnce} synced once (at the population's rate: ` +
    `${(e.fromPopulationRate * 100).toFixed(2)} points of the estimate), ${e.neverSynced} never synced (stale for sure)` +
    (e.notUpstream > 0 ? `; ${e.notUpstream} never synced and not found upstream are left out` : '')
  );
}

/** The continuous refresh as `status --json` carries it (`continuous`), and the overview shows it. */
export interface ContinuousStatus {
  /** The window spending the budget now, or the last one; null before the first. */
  window: {
    refreshRunId: number;
    /** `running`, `halted` (by the mass-removal breaker), or how it ended. */
    status: string;
    haltedReason: string | null;
    startedAt: string;
    /** When it stops handing out syncs and the next window begins (ISO). */
    endsAt: string | null;
    /** Requests a second it may spend (`REFRESH_BUDGET_PER_SEC`, rounded up). */
    budgetPerSec: number | null;
    /** Requests the whole window may spend: its budget times its length. */
    budgetRequests: number | null;
    /** Requests spent so far: syncs handed to the queue, each one request to the API (retries aside). */
    spent: number;
    /** What the budget allowed by now: budget × time since the window began, at most `budgetRequests`. */
    allowedByNow: number | null;
    /** Of the syncs handed out, those that have ended, and how. */
    ended: { total: number; succeeded: number; failed: number; notFound: number; invalid: number };
  } | null;
  /** The worker holding the lease, which serves the window; null when none does (nothing is refreshed). */
  leaseHolder: LeaseHolder | null;
  /** Subscribers due now: never planned, or past their `next_refresh_at` and not yet handed out. */
  dueNow: number;
  /** Subscribers whose last success is older than the max age, and that max age. */
  pastMaxAge: number;
  maxAgeSeconds: number;
  /** Subscribers never synced successfully: no copy at all. */
  neverSynced: number;
  /** The least recently synced subscriber's copy: when its last success was, and how old it is. */
  oldestCopy: { lastSuccessAt: string; ageSeconds: number } | null;
}

/**
 * Whether the refresh is continuous: the workers registered its scheduler, or (none registered
 * any) the last run was a continuous window.
 */
export function isContinuous(
  queue: Pick<QueueStatus, 'refreshMode'>,
  lastRefresh: RefreshRun | null,
): boolean {
  if (queue.refreshMode !== null) return queue.refreshMode === 'continuous';
  return lastRefresh?.trigger === 'continuous';
}

/** The continuous refresh's figures from what `status` and the overview already read, plus `dueNow`. */
export function continuousStatus(
  from: {
    lastRefresh: RefreshRun | null;
    freshness: Freshness;
    /** The oldest last success (`DataStatus.oldestSuccessAt`), ISO. */
    oldestSuccessAt: string | null;
    dueNow: number;
    leaseHolder: LeaseHolder | null;
  },
  now = new Date(),
): ContinuousStatus {
  const r = from.lastRefresh?.trigger === 'continuous' ? from.lastRefresh : null;
  const oldest = from.oldestSuccessAt === null ? null : new Date(from.oldestSuccessAt);
  return {
    window: r === null ? null : windowOf(r, now),
    leaseHolder: from.leaseHolder,
    dueNow: from.dueNow,
    pastMaxAge: from.freshness.pastMaxAge,
    maxAgeSeconds: from.freshness.maxAgeSeconds,
    neverSynced: from.freshness.neverSynced,
    oldestCopy:
      oldest === null
        ? null
        : {
            lastSuccessAt: oldest.toISOString(),
            ageSeconds: Math.max(0, Math.round((now.getTime() - oldest.getTime()) / 1000)),
          },
  };
}

function windowOf(r: RefreshRun, now: Date): NonNullable<ContinuousStatus['window']> {
  const endsAt = r.expectedFinishAt;
  // The window's budget is planned as budget × length (jobs/refresh/continuous-runner.ts).
  const lengthMs = endsAt ? endsAt.getTime() - r.startedAt.getTime() : null;
  const perSec =
    r.plannedSubscribers !== null && lengthMs !== null && lengthMs > 0
      ? r.plannedSubscribers / (lengthMs / 1000)
      : null;
  const elapsedMs = Math.max(
    0,
    Math.min(now.getTime(), endsAt?.getTime() ?? now.getTime()) - r.startedAt.getTime(),
  );
  const ended = r.succeeded + r.failed + r.notFound + r.invalid;
  return {
    refreshRunId: r.id,
    status: r.status,
    haltedReason: r.haltedReason,
    startedAt: r.startedAt.toISOString(),
    endsAt: endsAt ? endsAt.toISOString() : null,
    budgetPerSec: r.rateBudgetPerSec,
    budgetRequests: r.plannedSubscribers,
    spent: r.subscribersTotal,
    allowedByNow:
      perSec === null || r.plannedSubscribers === null
        ? null
        : Math.min(r.plannedSubscribers, Math.floor((perSec * elapsedMs) / 1000)),
    ended: {
      total: ended,
      succeeded: r.succeeded,
      failed: r.failed,
      notFound: r.notFound,
      invalid: r.invalid,
    },
  };
}
