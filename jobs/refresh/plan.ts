import type { Queue } from 'bullmq';
import type { Db } from '../../db/client.js';
import { countRefreshable, type RefreshRun, savePlan } from '../../db/refresh/index.js';
import type { Logger } from '../../src/logging/index.js';
import { formatTime } from '../../src/shared/index.js';
import { type RefreshJobData, SCHEDULER_ID } from './queue.js';

/**
 * A refresh within the rate budget: at its start, how long it will take at
 * `SYNC_RATE_LIMIT_PER_SEC` and whether that ends before the next scheduled refresh; while it
 * runs, its rate, done/total and ETA. `status`, the overview and `/metrics` read the same numbers.
 */

/** Counts the run's subscribers and records its plan; warns when it cannot end before the next one. */
export async function planRun(
  deps: { db: Db; refreshQueue?: Queue<RefreshJobData>; logger: Logger },
  run: RefreshRun,
  rateLimitPerSec: number,
): Promise<RefreshRun> {
  const planned = await countRefreshable(deps.db, run.staleBefore);
  const budget = rateLimitPerSec > 0 ? rateLimitPerSec : null;
  const expectedFinishAt =
    budget !== null ? new Date(run.startedAt.getTime() + Math.ceil((planned / budget) * 1000)) : null;
  const next = deps.refreshQueue ? (await deps.refreshQueue.getJobScheduler(SCHEDULER_ID))?.next : undefined;
  const planned_ = await savePlan(deps.db, run.id, {
    plannedSubscribers: planned,
    rateBudgetPerSec: budget,
    expectedFinishAt,
    nextRefreshAt: next ? new Date(next) : null,
  });
  const verdict = judge(planned_);
  if (verdict.overrun) deps.logger.warn({ refreshRunId: run.id, planned, budget }, verdict.overrun);
  return planned_;
}

export interface RefreshProgress {
  planned: number | null;
  done: number;
  /** Syncs a second, averaged since the run began; null before the first one. */
  ratePerSec: number | null;
  /** When the run should end at that rate (or, before any progress, at the budget). */
  etaAt: Date | null;
  /** Set, with the fix, when the run will not end before the next scheduled refresh. */
  overrun: string | null;
}

/** What `judge` says of a run: its plan's verdict at the start, and its live progress. */
export function progressOf(run: RefreshRun, now = new Date()): RefreshProgress {
  const done = run.succeeded + run.failed + run.notFound + run.invalid;
  const elapsed = (now.getTime() - run.startedAt.getTime()) / 1000;
  const ratePerSec = done > 0 && elapsed > 0 ? done / elapsed : null;
  const left = run.plannedSubscribers !== null ? Math.max(0, run.plannedSubscribers - done) : null;
  let etaAt: Date | null = null;
  // A continuous window ends when its time is up, whatever it spent: its plan is a budget of
  // requests, not a count of subscribers to get through.
  if (run.trigger === 'continuous') etaAt = run.expectedFinishAt;
  else if (left !== null && ratePerSec !== null) etaAt = new Date(now.getTime() + (left / ratePerSec) * 1000);
  else if (run.expectedFinishAt !== null) etaAt = run.expectedFinishAt;
  return {
    planned: run.plannedSubscribers,
    done,
    ratePerSec: ratePerSec === null ? null : Math.round(ratePerSec * 10) / 10,
    etaAt,
    overrun: judge(run, etaAt).overrun,
  };
}

/** Whether the run, by its plan or by `etaAt` when given, ends after the next scheduled refresh. */
function judge(run: RefreshRun, etaAt: Date | null = run.expectedFinishAt): { overrun: string | null } {
  if (etaAt === null || run.nextRefreshAt === null || etaAt <= run.nextRefreshAt) return { overrun: null };
  const hours = (ms: number) => `${(ms / 3_600_000).toFixed(1)} h`;
  const budget = run.rateBudgetPerSec;
  const needs =
    run.expectedFinishAt !== null && budget !== null
      ? `${run.plannedSubscribers} subscribers at SYNC_RATE_LIMIT_PER_SEC ${budget} take ${hours(run.expectedFinishAt.getTime() - run.startedAt.getTime())}`
      : `at its rate it ends at ${formatTime(etaAt)}`;
  return {
    overrun:
      `refresh run ${run.id} cannot finish before the next scheduled refresh at ${formatTime(run.nextRefreshAt)}: ` +
      `${needs}. Raise SYNC_RATE_LIMIT_PER_SEC if the API allows it, refresh only stale subscribers ` +
      '(refresh --stale), or schedule refreshes further apart (REFRESH_CRON)',
  };
}
