// How stale the copy is: the model's estimate and the audit's measurement. Pure.

import { MS_PER_DAY, pooledRate, type RatePrior, staleProbability } from './estimate.js';
import type { Observation } from './observation.js';
import type { AuditAction } from './schedule.js';

/** The population a subscriber synced once is counted at: its pooled rate, and its mixture once fitted. */
export type Population = Pick<RatePrior, 'ratePerDay' | 'mixture'>;

/** One subscriber as the estimate reads it. */
export interface Copy {
  ratePerDay: number | null;
  /**
   * The rate its last sync set for the estimate (schedule.ts `ScheduleUpdate.staleRatePerDay`);
   * absent or null (a row synced before it was kept): `ratePerDay`.
   */
  staleRatePerDay?: number | null;
  lastSuccessAt: number | null;
  /**
   * Whether its rate rests on observations of its own (two successes or more): false for one synced
   * once, whose rate is the population's for its kind of answer. The table says it (its
   * observations); absent (the simulator's copies, which only need the share), a copy with a rate
   * counts as learned.
   */
  observed?: boolean;
  /**
   * Never synced, and the API answered 404 for it: there is nothing upstream to copy, so it is
   * neither stale nor fresh, and the estimate leaves it out (an id an operator enqueued in error).
   */
  notUpstream?: boolean;
}

/**
 * The model's estimate of the stale share, with what it covers and how sure it is. Each copy is
 * stale with its own chance p = 1 − e^{−λ·age}: if every rate is right, the stale count is a sum of
 * independent Bernoulli draws, whose spread gives the interval. The model's own error (a rate that
 * is wrong, wallets that woke) is not in it: that is what the audit measures, and the two
 * disagreeing is the alert (docs/refresh.md).
 */
export interface StaleEstimate {
  /** The expected share of the covered subscribers whose stored cards differ from upstream. */
  share: number;
  /** The 95% interval of the share if every estimated rate is right (normal approximation). */
  low: number;
  high: number;
  /** Subscribers the estimate covers: all known ones but those not upstream. */
  covers: number;
  /** Of them: with a rate learned from observations of their own. */
  learned: number;
  /** Synced once: no interval observed yet, so at the population's mixture of rates. */
  syncedOnce: number;
  /** Never synced: nothing stored, counted stale for sure. */
  neverSynced: number;
  /** Never synced and not found upstream: left out. */
  notUpstream: number;
  /** The part of `share` that rests on the population's rate alone (the synced-once subscribers). */
  fromPopulationRate: number;
}

/**
 * The model's expected share of subscribers whose stored cards differ from upstream at `now`: the
 * mean of each copy's chance of being stale. One with syncs of its own counts 1 − e^{−λ·age} at the
 * rate its last sync stored for the estimate (`staleRatePerDay`, else its mean rate); one synced
 * once, the population's ({@link populationStaleProbability}); one never synced counts as stale
 * (nothing is stored), and one never synced that the API does not know is left out.
 */
export function staleEstimate(copies: Iterable<Copy>, now: number, population: Population): StaleEstimate {
  let covers = 0;
  let sum = 0;
  let variance = 0;
  let learned = 0;
  let syncedOnce = 0;
  let neverSynced = 0;
  let notUpstream = 0;
  let once = 0;
  for (const c of copies) {
    if (c.lastSuccessAt === null) {
      if (c.notUpstream) {
        notUpstream += 1;
        continue;
      }
      covers += 1;
      neverSynced += 1;
      sum += 1;
      continue;
    }
    covers += 1;
    // One synced once has no interval of its own: the population's mixture (or pooled rate), not the
    // rate stored at its sync (under whatever plan, or none, was in force then).
    const observed = c.observed ?? c.ratePerDay !== null;
    const ageDays = (now - c.lastSuccessAt) / MS_PER_DAY;
    const p = observed
      ? staleProbability(c.staleRatePerDay ?? c.ratePerDay ?? population.ratePerDay, ageDays)
      : populationStaleProbability(population, ageDays);
    sum += p;
    variance += p * (1 - p);
    if (observed) learned += 1;
    else {
      syncedOnce += 1;
      once += p;
    }
  }
  if (covers === 0)
    return {
      share: 0,
      low: 0,
      high: 0,
      covers,
      learned,
      syncedOnce,
      neverSynced,
      notUpstream,
      fromPopulationRate: 0,
    };
  const share = sum / covers;
  const half = (1.96 * Math.sqrt(variance)) / covers;
  return {
    share,
    low: Math.max(0, share - half),
    high: Math.min(1, share + half),
    covers,
    learned,
    syncedOnce,
    neverSynced,
    notUpstream,
    fromPopulationRate: once / covers,
  };
}

/** {@link staleEstimate}'s share alone. */
export function estimatedStaleShare(copies: Iterable<Copy>, now: number, population: Population): number {
  return staleEstimate(copies, now, population).share;
}

/**
 * The chance that the copy of a subscriber the population alone describes (synced once), `ageDays`
 * old, is stale: under the population's mixture, the mean of 1 − e^{−λ·age} over its rates; without
 * one, at its pooled rate. Not 1 − e^{−λ̄·age} at the mean rate λ̄, which a few fast wallets raise far
 * more than they raise the chance of a change (Jensen's inequality): in a fleet of under one sync
 * per subscriber per max age, that read 48.6% stale where 35.1% were.
 */
export function populationStaleProbability(population: Population, ageDays: number): number {
  const m = population.mixture;
  if (!m) return staleProbability(population.ratePerDay, ageDays);
  let p = 0;
  for (let k = 0; k < m.ratesPerDay.length; k++)
    p += m.weights[k]! * staleProbability(m.ratesPerDay[k]!, ageDays);
  return p;
}

export interface Interval {
  ratio: number;
  low: number;
  high: number;
}

/** The share `found` of `samples`, with its 95% Wilson score interval (null with no sample). */
export function wilson(found: number, samples: number, z = 1.96): Interval | null {
  if (samples <= 0) return null;
  const p = found / samples;
  const z2 = z * z;
  const denominator = 1 + z2 / samples;
  const centre = (p + z2 / (2 * samples)) / denominator;
  const half = (z * Math.sqrt((p * (1 - p)) / samples + z2 / (4 * samples * samples))) / denominator;
  return { ratio: p, low: Math.max(0, centre - half), high: Math.min(1, centre + half) };
}

/**
 * What the figures' reader (db/refresh `readFreshness`, which may not import this folder) is handed
 * to compute with: the audit's interval and a copy synced once's chance of being stale.
 */
export const STALE_MODEL = { interval: wilson, populationStale: populationStaleProbability } as const;

/**
 * Audit samples (of the last max age) below which a disagreement is not acted on: with fewer, one
 * lucky draw would swing the whole plan.
 */
export const AUDIT_ACTS_FROM = 30;

/**
 * How far outside the audit's interval the estimate may be before the plan stops trusting the rates:
 * the error the estimate is held to (30%, or 0.3 points of the share). Closer, the model is only as
 * wrong as models are, and round robin would cost more than it saves (bench:freshness, control).
 */
const AUDIT_TOLERANCE = { relative: 0.3, points: 0.003 };

/**
 * How often, in seconds, the continuous refresh reads the audit's draws since its plan was made,
 * between plans: an event that makes the rates wrong (every token reissued) shows within seconds in
 * those draws, where the last max age's still hold the draws from before it.
 */
export const AUDIT_CHECK_SECONDS = 10;

/** The audit's draws in one window: their 95% interval and how many they are. */
export type AuditWindow = Interval & { samples: number };

/**
 * How the plan acts on the audit: when the audit's 95% interval, of at least {@link AUDIT_ACTS_FROM}
 * samples, widened by {@link AUDIT_TOLERANCE}, excludes the model's estimate, the rates cannot be
 * trusted and the plan goes round in turn (src/freshness/threshold.ts `solveThreshold`), which no
 * wrong rate can make worse; the syncs go on teaching each subscriber's rate, and once the two
 * agree again the plan uses them. Two windows are read: the last max age (the steady measure), and
 * the draws since the plan in force was made (`sincePlan`), which see a sudden change at once. The
 * plan's own syncs since it was made (`plansSyncs`) count too, where they found far more changed than
 * it expected ({@link syncsDisagree}): every token reissued, seen in seconds.
 */
export function auditAction(
  estimate: number,
  audit: { lastMaxAge: AuditWindow | null; sincePlan?: AuditWindow | null; plansSyncs?: PlansSyncs | null },
): AuditAction {
  const windows = [disagrees(estimate, audit.lastMaxAge), disagrees(estimate, audit.sincePlan ?? null)];
  if (
    windows.includes('under') ||
    (audit.plansSyncs != null && syncsDisagree(audit.plansSyncs.expected, audit.plansSyncs))
  )
    return 'round-robin';
  return windows.includes('over') ? 'estimate-high' : 'none';
}

/**
 * Where the audit's steady window (`auditAction`'s `lastMaxAge`) begins, ms: the last max age, but
 * not before the plans in force began to expect what they expect ({@link expectationSince}: a plan
 * that goes round in turn, the one after it, or one expecting far otherwise begins anew). Draws made
 * under a plan of another kind measured another stale share: after going round in turn the copy is
 * staler than on the rates, or fresher, by several times, and the last max age's draws, held against
 * the estimate of now, sent the next plan the other way, plan after plan (seed 80801, world 9: 19
 * plans of 30 acting on the audit, 2.17% stale where the oracle keeps 0.73%; docs/refresh.md "When
 * the audit disagrees"). Production takes the same bound in SQL, on the database's clock that
 * stamps the ledger (jobs/refresh/policy.ts `judgeAudit`); the simulator calls this.
 */
export function auditJudgedFrom(expectedSince: number, now: number, maxAgeMs: number): number {
  return Math.max(expectedSince, now - maxAgeMs);
}

/** The refresh's own syncs since the plan in force was made, and the share of them it expected to find changed. */
export interface PlansSyncs {
  samples: number;
  changed: number;
  /** `Threshold.changedShare` of the plan in force. */
  expected: number;
}

/**
 * Whether the refresh's own syncs since the plan was made found the cards changed far more often than
 * the plan expected of them (`Threshold.changedShare`): the lower end of their 95% interval above
 * {@link grossMiss} of the expectation, over at least {@link AUDIT_ACTS_FROM} syncs (first syncs
 * apart, which have nothing to compare with). Every token reissued shows here within the first few
 * dozen syncs; the audit, a small share of the budget, needs a share of a max age to draw as many.
 * Only a gross miss counts: the plan's syncs are chosen by the rates, so a model a little wrong moves
 * their share a little, which the audit alone judges.
 */
export function syncsDisagree(
  expectedChangedShare: number,
  sincePlan: { samples: number; changed: number } | null,
): boolean {
  if (sincePlan === null || sincePlan.samples < AUDIT_ACTS_FROM) return false;
  const seen = wilson(sincePlan.changed, sincePlan.samples);
  return seen !== null && seen.low > grossMiss(expectedChangedShare);
}

/**
 * The latest of the refresh's own syncs that {@link syncsDisagree} reads, at most: enough for its 95%
 * interval to tell a gross miss at any expectation, few enough that the read stays small at any
 * budget, and the latest, so that a change shows in them undiluted by the syncs before it.
 */
export const PLANS_SYNCS_READ = 500;

/** An expectation the plans in force have held: since when, and the share it began at. */
export interface Expectation {
  since: number;
  from: number;
}

/**
 * Since when the plans in force have expected about the same of their own syncs: a plan's syncs
 * are held to its expectation together with those of the plans before it while each expected
 * within 30% (or 2 points) of the share the first of them expected, and none went round in turn (a
 * plan that goes round in turn, and the one after it, each begin anew, so that the syncs one plan
 * acted on are not judged again). Held to the first share, not the last, so that plans drifting a
 * step at a time (the expectation falling as the rates are learnt) do not judge early syncs by a
 * late expectation. The continuous refresh plans every 10 minutes at most (`replanEveryMs`): a
 * budget of a few syncs a minute gives one plan too few syncs to judge, and a mass change in a
 * sparse fleet went unseen until the audit, a small share of that budget, drew enough
 * (docs/refresh.md, "When its own syncs find far more changed"). `before`: the plan in force's
 * expectation and whether it went round in turn; null: no plan, or one that expected nothing (an
 * earlier release's). `next`: the plan being made.
 */
export function expectationSince(
  before: (Expectation & { roundRobin: boolean }) | null,
  next: { expected: number; roundRobin: boolean },
  now: number,
): Expectation {
  const anew = { since: now, from: next.expected };
  if (before === null || before.roundRobin || next.roundRobin) return anew;
  const near = Math.abs(next.expected - before.from) <= Math.max(0.3 * before.from, 0.02);
  return near ? { since: before.since, from: before.from } : anew;
}

/**
 * Where the refresh's own syncs judged against the plan in force begin: since its expectation held
 * ({@link expectationSince}), a fifth of the max age at most (the family's plan period,
 * bench:freshness-family, over which the check was judged), and no further back than the budget
 * takes to make twice {@link PLANS_SYNCS_READ} syncs, so that the read, of a ledger with no index in
 * time order, stays a thousand rows at any budget and max age. Of these, the latest
 * {@link PLANS_SYNCS_READ} count. The simulator, whose budget is that of the fleet it simulates (at
 * most 2,000), reaches back as many of its own syncs, over a longer time; and, its syncs coming a
 * tick at a time, a tick at least (`tickMs`).
 */
export function plansSyncsFrom(
  expectedSince: number,
  now: number,
  maxAgeMs: number,
  budgetPerSec: number,
  tickMs = 0,
): number {
  const readBackMs = Math.max(tickMs, (2 * PLANS_SYNCS_READ * 1000) / budgetPerSec);
  return Math.max(expectedSince, now - maxAgeMs / 5, now - readBackMs);
}

/**
 * The share found changed that no plain error of the rates explains, for a plan that expected
 * `expected`: twice it plus 5 points, or, where that is out of reach (a plan expecting more than 30%,
 * as one does whose budget syncs each copy less than once a max age), half of the copies it expected
 * unchanged found changed. Twice alone could never be exceeded above 47.5%, and a mass change in a
 * fleet that sparse went unseen: the audit's share of so small a budget draws too few to act, and the
 * plan kept syncing its busiest wallets while every copy was stale (bench:freshness-family,
 * docs/refresh.md "When the audit disagrees").
 */
function grossMiss(expected: number): number {
  return Math.min(2 * expected + 0.05, expected + (1 - expected) / 2);
}

/** Whether one window of the audit, of enough draws, excludes the estimate beyond the model's usual error. */
function disagrees(estimate: number, audit: AuditWindow | null): 'under' | 'over' | false {
  if (audit === null || audit.samples < AUDIT_ACTS_FROM) return false;
  const low = audit.low * (1 - AUDIT_TOLERANCE.relative) - AUDIT_TOLERANCE.points;
  const high = audit.high * (1 + AUDIT_TOLERANCE.relative) + AUDIT_TOLERANCE.points;
  return estimate < low ? 'under' : estimate > high ? 'over' : false;
}

/** The audit's latest draws a refit of the population's rate reads, at most ({@link refitPrior}). */
export const AUDIT_DRAWS_REFITTED = 5000;

/**
 * How old, in max ages, a drawn copy may be for its draw to count in a refit: production looks that
 * far back for the subscriber's success before the draw, one probe of each day partition of the
 * ledger in the span (db/refresh `auditDraws`), so the span bounds a plan's read: today's and
 * yesterday's partitions for a max age of minutes, the retention for the default week. The refit
 * reads each draw at its own age, so leaving out the oldest does not bias it.
 */
export const AUDIT_DRAW_SPAN_MAX_AGES = 20;

/**
 * The act on an estimate above the audit ({@link auditAction} `estimate-high`): the population's rate
 * refitted from the audit's own draws of the last max age, each an observation (its copy's age, and
 * whether the cards had changed), with no mixture. The rate the plan gives a subscriber it knows
 * little about, and the estimate counts it at, is otherwise learnt from the subscribers synced at
 * least twice, and under a plan that follows the rates those are the busier ones; the audit's draws
 * are uniform. Null with fewer than {@link AUDIT_ACTS_FROM} draws: the plan then goes round in turn.
 */
export function refitPrior(prior: RatePrior, auditDraws: readonly Observation[]): RatePrior | null {
  // The latest draws only, as production reads them (db/refresh `auditDraws`).
  const draws = auditDraws.slice(-AUDIT_DRAWS_REFITTED);
  if (draws.length < AUDIT_ACTS_FROM) return null;
  return {
    ratePerDay: pooledRate([draws], prior.ratePerDay),
    weight: prior.weight,
    mixture: null,
    ...(prior.forgetDays !== undefined ? { forgetDays: prior.forgetDays } : {}),
    ...(prior.changePointHazard !== undefined ? { changePointHazard: prior.changePointHazard } : {}),
  };
}
