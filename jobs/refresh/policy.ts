import type pg from 'pg';
import {
  auditDraws,
  auditSince,
  fillStaleRates,
  planEvidenceSample,
  plansSyncsSince,
  readFreshness,
  readPolicy,
  type StoredPolicy,
  savePolicy,
  withoutStaleRate,
} from '../../db/refresh/index.js';
import { liveFleet, strictestMaxAge } from '../../src/fleet/index.js';
import {
  AUDIT_DRAW_SPAN_MAX_AGES,
  AUDIT_DRAWS_REFITTED,
  type AuditAction,
  type AuditWindow,
  auditAction,
  expectationSince,
  fitGroupedMixture,
  forgetDaysFor,
  groupRates,
  MS_PER_DAY,
  observation,
  PLANNED_SHARE,
  PLANS_SYNCS_READ,
  type PlansSyncs,
  type PolicyParams,
  type Population,
  PRIOR_WEIGHT,
  plannedRates,
  plansSyncsFrom,
  policyParams,
  pooledRate,
  refitPrior,
  STALE_MODEL,
  solveThreshold,
  staleRateOf,
  syncsDisagree,
  wilson,
} from '../../src/freshness/index.js';
import type { Logger } from '../../src/logging/index.js';
import { formatDuration } from '../../src/shared/index.js';

/** The refresh settings a plan is made for. */
export interface RefreshPlanSettings {
  mode: 'nightly' | 'continuous';
  /** Requests a second the refresh spends; null: no budget (a nightly run as fast as it goes). */
  budgetPerSec: number | null;
  maxAgeMs: number;
  auditShare: number;
}

/**
 * Makes the refresh's shared plan from a sample of subscribers (src/freshness): the population's
 * prior rate, and the threshold that spends the budget where the copy is most likely stale, with
 * every interval within the max age. Saves it in `refresh_policy`, where every worker reads it,
 * and says (once, as a warning) when the budget cannot keep the max age at all: the smallest
 * REFRESH_MAX_AGE among the live workers, since each reschedules the subscribers it syncs within
 * its own (the fleet warns of the difference itself, SETTINGS DIFFER). `before`: the plan in force,
 * whose audit draws since it was made are judged beside the last max age's, and whose own syncs are
 * held to what it expected of them. Returns the plan as saved and the estimate of the stale share it
 * was judged against (null in nightly mode).
 */
export async function replan(
  pool: pg.Pool,
  settings: RefreshPlanSettings,
  logger?: Logger,
  before?: PlanInForce,
): Promise<StoredPolicy & { estimatedStaleRatio: number | null; syncsMissed: boolean }> {
  const maxAgeDays = settings.maxAgeMs / MS_PER_DAY;
  const sample = await planEvidenceSample(pool);
  const observations = sample.samples.map((s) => s.observations);
  const prior = pooledRate(observations, 1 / maxAgeDays);
  const forgetDays = forgetDaysFor(maxAgeDays);
  // One mixture per evidence group of the answers (src/freshness/evidence.ts), with forgetting.
  const priorMixture = fitGroupedMixture(sample.samples, prior, forgetDays);
  const weight = sample.samples.length > 0 ? sample.total / sample.samples.length : 1;
  // The load is that of the rates the next syncs will plan by, under this prior (as the workers
  // read it: src/freshness/schedule.ts `policyParams`), each at the interval the plan in force gives
  // (a nightly plan is made without `before`: the stored one is in force).
  const inForce = policyParams(before ?? (await readPolicy(pool)), settings.maxAgeMs);
  const groups = groupRates(
    plannedRates(
      sample.samples,
      {
        ratePerDay: prior,
        weight: PRIOR_WEIGHT,
        mixture: priorMixture,
        forgetDays,
      },
      inForce,
    ),
    weight,
  );
  // A nightly sweep without a budget syncs everyone once a day: the threshold only orders it.
  const refreshPerDay =
    settings.budgetPerSec !== null ? settings.budgetPerSec * 86_400 : Math.max(1, sample.total);
  const scheduledPerDay =
    refreshPerDay * (settings.mode === 'continuous' ? 1 - settings.auditShare : 1) * PLANNED_SHARE;
  // When the audit disagrees with the estimate beyond the model's usual error, the rates cannot be
  // trusted: the plan goes round in turn until the two agree again (src/freshness `auditAction`).
  const judged: { action: AuditAction; estimate: number | null; syncsMissed: boolean } =
    settings.mode === 'continuous'
      ? await judgeAudit(pool, settings, before, { ratePerDay: prior, mixture: priorMixture }).catch(() => ({
          action: 'none' as const,
          estimate: null,
          syncsMissed: false,
        }))
      : { action: 'none' as const, estimate: null, syncsMissed: false };
  const judgedAction: AuditAction = judged.action;
  // The estimate above the audit: the population's rate is refitted from the audit's own draws
  // (src/freshness `refitPrior`), and the plan is made on it; too few draws, round in turn.
  const refit =
    judgedAction === 'estimate-high'
      ? refitPrior(
          { ratePerDay: prior, weight: PRIOR_WEIGHT, forgetDays },
          // Unreadable, none to refit from: the plan goes round in turn, as it did before the refit.
          (
            await auditDraws(
              pool,
              settings.maxAgeMs / 1000,
              AUDIT_DRAWS_REFITTED,
              (settings.maxAgeMs / 1000) * AUDIT_DRAW_SPAN_MAX_AGES,
            ).catch((error: Error) => {
              logger?.warn(
                { err: error.message },
                "the audit's draws could not be read to refit the population's rate",
              );
              return [];
            })
          ).map((d) => observation(d.ageDays, d.changed)),
        )
      : null;
  const audit: AuditAction = judgedAction === 'estimate-high' && !refit ? 'round-robin' : judgedAction;
  const threshold = solveThreshold(
    refit ? groupRates(plannedRates(sample.samples, refit, inForce), weight) : groups,
    scheduledPerDay,
    { maxAgeDays, minIntervalDays: 0 },
    refit ? 'none' : audit,
  );
  const strictest = strictestMaxAge(await liveFleet(pool).catch(() => []), settings.maxAgeMs);
  const maxAgeNeedsPerSec = sample.total / (strictest.ms / 1000);
  const keepsMaxAge =
    settings.budgetPerSec === null ||
    maxAgeNeedsPerSec <=
      settings.budgetPerSec * (settings.mode === 'continuous' ? 1 - settings.auditShare : 1);
  // Since when the plans have expected about this share: the syncs held to it reach back to then.
  const now = Date.now();
  const expectation = expectationSince(
    before === undefined || before.expectedFrom === null
      ? null
      : {
          from: before.expectedFrom,
          since: before.expectedSince.getTime(),
          roundRobin: before.auditAction === 'round-robin',
        },
    { expected: threshold.changedShare, roundRobin: audit === 'round-robin' },
    now,
  );
  const plan = {
    mode: settings.mode,
    thresholdDays: Number.isFinite(threshold.thresholdDays) ? threshold.thresholdDays : null,
    priorRatePerDay: refit?.ratePerDay ?? prior,
    priorMixture: refit ? null : priorMixture,
    maxAgeSeconds: Math.round(settings.maxAgeMs / 1000),
    budgetPerSec: settings.budgetPerSec,
    auditShare: settings.auditShare,
    subscribers: sample.total,
    keepsMaxAge,
    maxAgeNeedsPerSec,
    coverageDays: threshold.coverageDays ?? null,
    spend: threshold.spend,
    auditAction: audit,
    expectedChangedShare: threshold.changedShare,
    minIntervalDays: threshold.minIntervalDays,
  };
  // The first plan with a mixture (the plan in force has none: none yet, or a refit from the
  // audit) stores a stale rate for the subscribers synced without one; before the plan is stored,
  // so that a pass cut short (a restart) is made again by the next plan.
  if (plan.priorMixture !== null && !inForce.prior.mixture) {
    // Not a reason to leave the plan unmade: a row left counts at its mean rate until its next sync.
    const filled = await fillStaleRatesUnder(pool, policyParams(plan, settings.maxAgeMs)).catch(
      (error: Error) => {
        logger?.warn(
          { err: error.message },
          'stale rates for the subscribers synced before the mixture not stored',
        );
        return 0;
      },
    );
    if (filled > 0)
      logger?.info(
        { filled },
        'the first plan with a mixture: stale rates stored for the subscribers synced before it',
      );
  }
  // A plan that begins its own expectation takes the database's clock, as computed_at does; the
  // stored times come back, and the next plan reads them from the plan in force.
  const saved = await savePolicy(pool, {
    ...plan,
    expectedSince: expectation.since === now ? null : new Date(expectation.since),
    expectedFrom: expectation.from,
  });
  if (refit)
    logger?.warn(
      { subscribers: sample.total, sampledRatePerDay: prior, auditRatePerDay: refit.ratePerDay },
      "the refresh's estimate of the stale share is above what its audit finds: the population's rate is refitted from the audit's own draws and the plan is made on it (docs/refresh.md)",
    );
  if (audit === 'round-robin')
    logger?.warn(
      { subscribers: sample.total },
      "the refresh's audit disagrees with its estimate of the stale share: the plan goes round every subscriber in turn until they agree again (docs/refresh.md)",
    );
  if (!keepsMaxAge) {
    const judged = { ...plan, maxAgeSeconds: strictest.ms / 1000 };
    const whose =
      strictest.heldBy === null
        ? ''
        : ` (REFRESH_MAX_AGE ${formatDuration(strictest.ms / 1000)} is live worker ${strictest.heldBy}'s, the smallest in the fleet)`;
    logger?.warn(
      { subscribers: sample.total, ...(strictest.heldBy ? { heldBy: strictest.heldBy } : {}) },
      `${maxAgeVerdict(judged)!}${whose}`,
    );
  }
  return { ...plan, ...saved, estimatedStaleRatio: judged.estimate, syncsMissed: judged.syncsMissed };
}

/**
 * Stores, for every subscriber with observations and no stale rate (synced before the plan had a
 * mixture), the stale rate a sync under `params` would store (src/freshness `staleRateOf`): the
 * estimate otherwise counts it at its mean rate until its next sync, which a budget of under one
 * sync per subscriber per max age puts a round of the fleet away (docs/refresh.md, "How stale is
 * the copy?"). One pass over the table, 5,000 rows a page. Returns how many it stored.
 */
async function fillStaleRatesUnder(pool: pg.Pool, params: PolicyParams): Promise<number> {
  let filled = 0;
  for (let after = 0; ; ) {
    const page = await withoutStaleRate(pool, after);
    if (page.length === 0) return filled;
    const rates = page.flatMap((r) => {
      const staleRatePerDay = staleRateOf(r.observations, r.evidence, params);
      return staleRatePerDay === null || !Number.isFinite(staleRatePerDay)
        ? []
        : [{ id: r.id, staleRatePerDay }];
    });
    filled += await fillStaleRates(pool, rates);
    after = page.at(-1)!.id;
  }
}

/** What the next plan reads of the plan in force: when it was made, and what it expected of its syncs. */
export type PlanInForce = Pick<
  StoredPolicy,
  | 'computedAt'
  | 'expectedChangedShare'
  | 'expectedSince'
  | 'expectedFrom'
  | 'auditAction'
  | 'thresholdDays'
  | 'priorRatePerDay'
  | 'priorMixture'
  | 'coverageDays'
  | 'minIntervalDays'
>;

/**
 * How the plan acts on the audit, of the last max age and since the plan in force was made, and on
 * that plan's own syncs, against the estimate (src/freshness `auditAction`); and the estimate.
 */
async function judgeAudit(
  pool: pg.Pool,
  settings: RefreshPlanSettings,
  before: PlanInForce | undefined,
  population: Population,
): Promise<{ action: AuditAction; estimate: number; syncsMissed: boolean }> {
  const { maxAgeMs, budgetPerSec } = settings;
  const f = await readFreshness(pool, maxAgeMs, STALE_MODEL, population);
  const { samples, staleRatio, low, high } = f.audit;
  // The last max age's draws, but none made under plans of another kind than those in force
  // (src/freshness `auditJudgedFrom`, here on the database's clock, as the ledger is stamped).
  const lastMaxAge =
    before === undefined
      ? staleRatio === null || low === null || high === null
        ? null
        : { ratio: staleRatio, low, high, samples }
      : await auditWindowSince(pool, before.expectedSince, maxAgeMs / 1000);
  const sincePlan = before === undefined ? null : await auditWindowSince(pool, before.computedAt);
  const plansSyncs =
    before === undefined || budgetPerSec === null
      ? null
      : await plansSyncsOf(pool, before, { maxAgeMs, budgetPerSec });
  return {
    action: auditAction(f.estimatedStaleRatio, { lastMaxAge, sincePlan, plansSyncs }),
    estimate: f.estimatedStaleRatio,
    syncsMissed: plansSyncs !== null && syncsDisagree(plansSyncs.expected, plansSyncs),
  };
}

/**
 * The refresh's latest own syncs since the plan in force's expectation held (src/freshness
 * `plansSyncsFrom`), with what it expected of them (null: it expected nothing, an earlier release's plan).
 */
export async function plansSyncsOf(
  pool: pg.Pool,
  plan: PlanInForce,
  settings: { maxAgeMs: number; budgetPerSec: number },
): Promise<PlansSyncs | null> {
  if (plan.expectedChangedShare === null) return null;
  const from = plansSyncsFrom(
    plan.expectedSince.getTime(),
    Date.now(),
    settings.maxAgeMs,
    settings.budgetPerSec,
  );
  return {
    ...(await plansSyncsSince(pool, new Date(from), PLANS_SYNCS_READ)),
    expected: plan.expectedChangedShare,
  };
}

/** The audit's draws since `since` as src/freshness `auditAction` reads a window (null: none yet). */
export async function auditWindowSince(
  pool: pg.Pool,
  since: Date,
  withinSeconds?: number,
): Promise<AuditWindow | null> {
  const a = await auditSince(pool, since, withinSeconds);
  const w = wilson(a.changed, a.samples);
  return w === null ? null : { ...w, samples: a.samples };
}

/** Null when the budget keeps REFRESH_MAX_AGE; otherwise what it would take, with the fixes. */
function maxAgeVerdict(
  p: Pick<
    StoredPolicy,
    | 'keepsMaxAge'
    | 'subscribers'
    | 'maxAgeSeconds'
    | 'maxAgeNeedsPerSec'
    | 'budgetPerSec'
    | 'mode'
    | 'auditShare'
  >,
): string | null {
  if (p.keepsMaxAge) return null;
  return (
    `the refresh budget cannot keep REFRESH_MAX_AGE: ${p.subscribers} subscribers once per ${formatDuration(p.maxAgeSeconds)} need ` +
    `${p.maxAgeNeedsPerSec.toFixed(2)} syncs/s, the budget for the schedule is ` +
    `${((p.budgetPerSec ?? 0) * (p.mode === 'continuous' ? 1 - p.auditShare : 1)).toFixed(2)}/s. ` +
    'Raise REFRESH_BUDGET_PER_SEC (or SYNC_RATE_LIMIT_PER_SEC) if the API allows it, or lengthen REFRESH_MAX_AGE'
  );
}
