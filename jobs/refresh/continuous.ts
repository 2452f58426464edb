import { setTimeout as sleep } from 'node:timers/promises';
import type { Queue } from 'bullmq';
import type pg from 'pg';
import { type Db, poolOf } from '../../db/client.js';
import {
  capDueTimes,
  capHolds,
  claimDue,
  dueInTurn,
  pullInSeenOnce,
  type RefreshRun,
  randomSubscribers,
  readPolicy,
  recordFanoutPage,
  type StoredPolicy,
} from '../../db/refresh/index.js';
import {
  AUDIT_CHECK_SECONDS,
  afterClaim,
  aheadWindow,
  allowance,
  auditAction,
  chooseAhead,
  MS_PER_DAY,
  policyParams,
  pullIn,
  replanEveryMs,
  splitForAudit,
} from '../../src/freshness/index.js';
import type { Logger } from '../../src/logging/index.js';
import { enqueueSyncs, type SyncJobData, type SyncJobResult } from '../sync/index.js';
import { auditWindowSince, plansSyncsOf, type RefreshPlanSettings, replan } from './policy.js';

// REFRESH_MODE=continuous: a refresh run that spends REFRESH_BUDGET_PER_SEC for a window (an
// hour by default), taking the subscribers due first (src/freshness decides when each is due)
// and REFRESH_AUDIT_SHARE of the budget on subscribers drawn uniformly at random. The window is an
// ordinary refresh run: the wipe breaker, pause/resume, the ops lane's priority, handing back on
// shutdown and its closing counts work as for a nightly one. When it closes, the next begins.
// Whoever holds the continuous refresh's lease runs it (db/refresh/lease-session.ts); its claims go
// over the lease's own session, so a process that lost the lease can no longer hand out budget.

export interface ContinuousOptions {
  budgetPerSec: number;
  auditShare: number;
  maxAgeMs: number;
  /** How long one run spends the budget before it closes and the next begins. Default 1 h. */
  windowMs?: number;
  /** How often the budget is handed out. Default 1000 ms. */
  tickMs?: number;
  /** How often the shared plan is made again. Default 10 min, or a fifth of the max age if shorter. */
  replanMs?: number;
  /** How often the audit's draws since the plan are read between plans. Default AUDIT_CHECK_SECONDS. */
  auditCheckMs?: number;
}

export interface ContinuousStep {
  /** The run as the breaker last saw it; the fan-out stops when it is no longer running. */
  check(run: RefreshRun): Promise<RefreshRun>;
  /** Resolves once the refresh may claim slots (the ops lane first). */
  claimShare(): Promise<unknown>;
  /** The refresh's own backlog in the queue. */
  backlog(): Promise<number>;
  stopping(): boolean;
  handBack(): Promise<never>;
  /** Called after each tick that handed out work, with the run's enqueued count. */
  progress?(enqueued: number): Promise<unknown>;
}

/**
 * Makes the shared plan again, then pulls in what it asks sooner than the due times planned under
 * the one before (`before`, as stored): REFRESH_MAX_AGE is a hard bound (plans made under a longer
 * one are pulled within it), coverage shortens the longest interval, a subscriber seen once is
 * planned at the population's rate, and a plan that goes round in turn because its own
 * syncs found nearly everything changed takes everyone in the order of their last syncs. Returns the plan as stored, and the estimate it was judged
 * against (jobs/refresh/policy.ts `replan`).
 */
export async function replanAndPullIn(
  deps: { pool: pg.Pool; claims: pg.Pool; logger: Logger },
  before: StoredPolicy | undefined,
  settings: RefreshPlanSettings,
): Promise<StoredPolicy & { estimatedStaleRatio: number | null; syncsMissed: boolean }> {
  // A claim's hold was made under the max age of its day: a lowered one shortens them, before the
  // plan that records the new max age is stored (after it, a crash would leave them long for good).
  if (before !== undefined && Math.round(settings.maxAgeMs / 1000) < before.maxAgeSeconds) {
    const held = await capHolds(deps.claims, settings.maxAgeMs);
    if (held > 0) deps.logger.info({ held }, "claims' holds beyond the lowered max age shortened to it");
  }
  const stored = await replan(deps.pool, settings, deps.logger, before);
  const pull = pullIn(
    before ? policyParams(before, settings.maxAgeMs) : undefined,
    policyParams(stored, settings.maxAgeMs),
    { roundRobin: stored.auditAction === 'round-robin', syncsMissed: stored.syncsMissed },
  );
  const pulled = await capDueTimes(deps.claims, pull.longestDays * MS_PER_DAY);
  if (pulled > 0)
    deps.logger.info({ pulled }, "due times beyond the plan's longest interval pulled within it");
  if (pull.seenOnceDays !== null) {
    const seenOnce = await pullInSeenOnce(deps.claims, pull.seenOnceDays * MS_PER_DAY);
    if (seenOnce > 0)
      deps.logger.info({ pulled: seenOnce }, "subscribers seen once pulled in to the population's rate");
  }
  if (pull.inTurnDays !== null) {
    const inTurn = await dueInTurn(deps.claims, pull.inTurnDays * MS_PER_DAY);
    deps.logger.info(
      { moved: inTurn },
      "the plan's own syncs found far more changed than it expected: due times planned sooner than the round put back to it, so that the copies synced longest ago come first",
    );
  }
  return stored;
}

/** Runs one window's fan-out; returns the run as it stands when the window is over. */
export async function continuousFanout(
  deps: {
    db: Db;
    logger: Logger;
    syncQueue: Queue<SyncJobData, SyncJobResult>;
    /** Where the claims and the run's fan-out counts are written (the lease's session). Default `db`. */
    claims?: Db;
  },
  initial: RefreshRun,
  o: ContinuousOptions,
  step: ContinuousStep,
): Promise<RefreshRun> {
  const pool = poolOf(deps.db);
  const claims = deps.claims ?? deps.db;
  const windowMs = o.windowMs ?? 3_600_000;
  const tickMs = o.tickMs ?? 1000;
  const replanMs = o.replanMs ?? replanEveryMs(o.maxAgeMs);
  // A few seconds of budget waiting in Redis at most: a claim's due time is stamped when it is
  // made, so a long queue would stamp it long before the sync.
  const most = Math.max(10, Math.ceil(o.budgetPerSec * 5));
  const settings = {
    mode: 'continuous' as const,
    budgetPerSec: o.budgetPerSec,
    maxAgeMs: o.maxAgeMs,
    auditShare: o.auditShare,
  };
  let run = initial;
  let markedAt: number | null = null;
  let carry = 0;
  let stored: (StoredPolicy & { estimatedStaleRatio?: number | null }) | undefined = await readPolicy(pool);
  let auditCheckedAt = Date.now();
  const fresh = () =>
    stored !== undefined &&
    stored.mode === 'continuous' &&
    Date.now() - stored.computedAt.getTime() < replanMs &&
    stored.budgetPerSec === o.budgetPerSec &&
    stored.maxAgeSeconds === Math.round(o.maxAgeMs / 1000);
  while (Date.now() - run.startedAt.getTime() < windowMs) {
    run = await step.check(run);
    if (run.status !== 'running') return run;
    if (step.stopping()) await step.handBack();
    await step.claimShare();
    if ((await deps.syncQueue.isPaused()) || (await step.backlog()) >= most) {
      markedAt = null;
      await sleep(tickMs);
      continue;
    }
    if (!fresh() || (await auditDisagreesSincePlan()))
      stored = await replanAndPullIn({ pool, claims: poolOf(claims), logger: deps.logger }, stored, settings);
    const params = policyParams(stored, o.maxAgeMs);
    const allowed = allowance(markedAt, Date.now(), o.budgetPerSec);
    markedAt = allowed.markedAt;
    const split = splitForAudit(allowed.count, o.auditShare, carry);
    carry = split.carry;
    const due = await claimDue(poolOf(claims), split.scheduled, (s, now) => afterClaim(s, now, params), {
      choose: chooseAhead,
      window: aheadWindow,
    });
    const sampled = await randomSubscribers(pool, split.audit);
    // Claims are numbered within the run (subscribersTotal counts every one handed out so far).
    const first = run.subscribersTotal + 1;
    const counts = [
      await enqueueSyncs(
        deps.syncQueue,
        due.map((subscriberId) => ({ subscriberId })),
        'refresh',
        { refreshRunId: run.id, firstClaim: first },
      ),
      await enqueueSyncs(
        deps.syncQueue,
        sampled.map((subscriberId) => ({ subscriberId })),
        'audit',
        { refreshRunId: run.id, firstClaim: first + due.length },
      ),
    ];
    const enqueued = counts[0]!.enqueued + counts[1]!.enqueued;
    if (due.length + sampled.length > 0) {
      await recordFanoutPage(claims, run.id, {
        cursor: { after: run.cursor, afterDue: run.cursorDue },
        subscribers: due.length + sampled.length,
        enqueued,
        alreadyQueued: counts[0]!.alreadyQueued + counts[1]!.alreadyQueued,
      });
      run = {
        ...run,
        enqueued: run.enqueued + enqueued,
        subscribersTotal: run.subscribersTotal + due.length + sampled.length,
      };
      await step.progress?.(run.enqueued);
    }
    await sleep(tickMs);
  }
  return run;

  /**
   * Every AUDIT_CHECK_SECONDS, between plans: whether the audit's draws since the plan in force was
   * made disagree with the estimate it was made on, or its own syncs found far more changed than it
   * expected (src/freshness `auditAction`), so that the plan is made again at once rather than at
   * its cadence. A plan already going round in turn, or one
   * another process made (no estimate in hand), waits for its cadence.
   */
  async function auditDisagreesSincePlan(): Promise<boolean> {
    if (Date.now() - auditCheckedAt < (o.auditCheckMs ?? AUDIT_CHECK_SECONDS * 1000)) return false;
    auditCheckedAt = Date.now();
    const estimate = stored?.estimatedStaleRatio;
    if (stored === undefined || stored.auditAction === 'round-robin' || estimate == null) return false;
    const sincePlan = await auditWindowSince(pool, stored.computedAt);
    const plansSyncs = await plansSyncsOf(pool, stored, o);
    const disagrees = auditAction(estimate, { lastMaxAge: null, sincePlan, plansSyncs }) === 'round-robin';
    if (disagrees)
      deps.logger.info(
        { samples: sincePlan?.samples, plansSyncs: plansSyncs?.samples, foundChanged: plansSyncs?.changed },
        "the audit's draws or the plan's own syncs since the plan was made disagree with it: planning again now",
      );
    return disagrees;
  }
}
