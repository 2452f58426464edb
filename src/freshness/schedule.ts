import { estimateRate, forgetDaysFor, MS_PER_DAY, PRIOR_WEIGHT, type RatePrior } from './estimate.js';
import { type Evidence, type EvidenceSample, mixtureFor } from './evidence.js';
import { posteriorRateDraw, type RateMixture } from './mixture.js';
import { appendObservation, type Observation, observation } from './observation.js';

// When each subscriber is synced next, within a request budget. Pure: the time is always passed
// in, so the simulator (bench/freshness.ts) runs the same code as the workers.
//
// The policy is Cho & Garcia-Molina's optimal refresh for freshness ("Effective page refresh
// policies", TODS 2003): among subscribers whose cards change as Poisson processes of rates λᵢ,
// the share that is fresh, averaged over time, is largest within a budget of B syncs a day when
// each is synced every Iᵢ days with
//   g(λᵢ, Iᵢ) = (1 − e^{−λᵢIᵢ}(1 + λᵢIᵢ)) / λᵢ = μ,
// one threshold μ for all, set so that Σ 1/Iᵢ = B. g is what one more sync a day is worth to a
// subscriber (in fresh days); it grows with the interval, up to 1/λ. So a subscriber that never
// changes waits long (here: REFRESH_MAX_AGE), one that changes often is synced often, and one
// that changes so often that no affordable interval keeps it fresh (1/λ < μ) is left to the max
// age: the budget buys more freshness elsewhere. Every sync sets `next_refresh_at` = now + I;
// the scheduler takes the earliest due first, which an index serves.

/**
 * The share of the schedule's budget the due times are planned to spend. The rest keeps the
 * scheduler ahead of its due times, so that the max age holds when many fall due at once.
 */
export const PLANNED_SHARE = 0.9;

/**
 * No interval is planned longer than this share of the max age: the rest is the margin that a
 * scheduler behind its due times (a burst of them, a change of threshold) eats before the bound.
 */
export const MAX_AGE_PLANNED = 0.9;

/** What the scheduler and the workers share, from `refresh_policy`. */
export interface PolicyParams {
  /** μ in days; Infinity when the budget cannot sync everyone even once per max age. */
  thresholdDays: number;
  /** `REFRESH_MAX_AGE` in days: no interval is longer. */
  maxAgeDays: number;
  /** Shortest interval between two syncs of one subscriber, days. */
  minIntervalDays: number;
  prior: RatePrior;
}

/** h(x) = 1 − e^{−x}(1+x): g(λ, I)·λ with x = λI; increasing from 0 to 1. */
function h(x: number): number {
  return -Math.expm1(-x) - x * Math.exp(-x);
}

/** The x in (0, 700] with h(x) = y, for 0 < y < 1. */
function hInverse(y: number): number {
  let lo = 0;
  let hi = 700;
  for (let i = 0; i < 64; i++) {
    const mid = (lo + hi) / 2;
    if (h(mid) < y) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

/** The days between two syncs of a subscriber whose cards change `ratePerDay` times a day. */
export function intervalDays(
  ratePerDay: number,
  params: Pick<PolicyParams, 'thresholdDays' | 'maxAgeDays' | 'minIntervalDays'>,
): number {
  const { thresholdDays: mu, maxAgeDays, minIntervalDays } = params;
  let days = Number.POSITIVE_INFINITY;
  if (Number.isFinite(mu) && ratePerDay > 0) {
    const y = mu * ratePerDay;
    if (y <= 0) days = minIntervalDays;
    else if (y < 1) days = hInverse(y) / ratePerDay;
  }
  return Math.min(maxAgeDays * MAX_AGE_PLANNED, Math.max(minIntervalDays, days));
}

/** A subscriber's schedule as stored in `subscribers`. */
export interface SubscriberSchedule {
  lastSuccessAt: number | null;
  observations: readonly Observation[] | null;
  ratePerDay: number | null;
  /** What the sync's answer says besides the cards' sameness (src/freshness/evidence.ts). */
  evidence?: Evidence | null;
}

/** What a successful sync writes to its subscriber's row. */
export interface ScheduleUpdate {
  observations: Observation[] | null;
  ratePerDay: number;
  nextRefreshAt: number;
}

/**
 * After a successful sync at `now` (ms) that found the cards `changed` or not: the new
 * observation (the interval since the last success), the new estimate, the next due time.
 * A first success has no interval to observe. With `draw` (a uniform in [0, 1)), the due time is
 * planned from a rate drawn from the subscriber's posterior (Thompson sampling) instead of its
 * mean: an experiment of the simulator's (`--explore`), not yet the workers'.
 */
export function afterSuccess(
  before: SubscriberSchedule,
  changed: boolean,
  now: number,
  params: PolicyParams,
  draw?: number,
): ScheduleUpdate {
  const observations =
    before.lastSuccessAt !== null && now > before.lastSuccessAt
      ? appendObservation(
          before.observations,
          observation((now - before.lastSuccessAt) / MS_PER_DAY, changed),
        )
      : before.observations === null
        ? null
        : [...before.observations];
  const ratePerDay = estimateRate(observations, params.prior, before.evidence);
  const planned =
    draw !== undefined && params.prior.mixture
      ? posteriorRateDraw(
          observations,
          mixtureFor(params.prior.mixture, before.evidence, observations),
          draw,
          params.prior.forgetDays,
        )
      : ratePerDay;
  // Exploration only ever asks sooner: a draw that reads a wallet busier than the budget can keep
  // fresh would otherwise leave it to the max age.
  const days = Math.min(intervalDays(ratePerDay, params), intervalDays(planned, params));
  return { observations, ratePerDay, nextRefreshAt: now + days * MS_PER_DAY };
}

/**
 * The rates a plan's threshold is solved on: each sampled subscriber's estimate under the prior
 * the plan has just fitted, as its next sync will make it. Not the rates stored at each one's
 * last sync: those were estimated under older priors (under none for a subscriber synced before
 * the first mixture was fitted, which reads as the population's single rate), and a threshold
 * solved on them expects a load the syncs will not plan. While the refresh learns, the stored
 * rates lag far behind (a first sweep's are all the same), and the plan then overestimated the
 * load, pushed every interval out to the max age and left the budget with nobody due.
 */
export function plannedRates(samples: readonly EvidenceSample[], prior: RatePrior): number[] {
  return samples.map((s) => estimateRate(s.observations, prior, s.evidence));
}

/**
 * When the scheduler hands a subscriber to the queue at `now`, its due time moves on, so no other
 * scheduler takes it again, and a sync that never happens (a crash, a failure) is not forgotten:
 * it falls due again after its usual interval, but no later than its max age allows, and not
 * sooner than a lease of an eighth of the max age (a subscriber that keeps failing is not asked
 * every second). The sync's success sets the real next time.
 */
export function afterClaim(subscriber: SubscriberSchedule, now: number, params: PolicyParams): number {
  const lease = claimLeaseMs(params.maxAgeDays * MS_PER_DAY);
  const rate = subscriber.ratePerDay ?? params.prior.ratePerDay;
  const usual = now + intervalDays(rate, params) * MS_PER_DAY;
  const bound =
    subscriber.lastSuccessAt === null
      ? now + lease
      : subscriber.lastSuccessAt + params.maxAgeDays * MS_PER_DAY;
  return Math.max(Math.min(usual, bound), now + lease);
}

/**
 * How long a subscriber handed to the queue is left to its job before the refresh takes it again:
 * an eighth of the max age. A claim's, and an operator's enqueue of a new subscriber's.
 */
export function claimLeaseMs(maxAgeMs: number): number {
  return maxAgeMs / 8;
}

/** Rates of a population, grouped on a log scale (60 groups a decade are within 4% of each rate). */
export interface RateGroup {
  ratePerDay: number;
  count: number;
}

export function groupRates(rates: Iterable<number>, weight = 1): RateGroup[] {
  const groups = new Map<number, RateGroup>();
  for (const rate of rates) {
    const key = rate > 0 ? Math.round(Math.log10(rate) * 60) : Number.NEGATIVE_INFINITY;
    const group = groups.get(key);
    if (group) group.count += weight;
    else groups.set(key, { ratePerDay: rate > 0 ? 10 ** (key / 60) : 0, count: weight });
  }
  return [...groups.values()];
}

/** Syncs a day the population needs at threshold μ. */
function load(groups: readonly RateGroup[], params: Parameters<typeof intervalDays>[1]): number {
  let perDay = 0;
  for (const g of groups) perDay += g.count / intervalDays(g.ratePerDay, params);
  return perDay;
}

export interface Threshold {
  thresholdDays: number;
  /** Whether the budget syncs everyone at least once per max age. */
  keepsMaxAge: boolean;
  /** Syncs a day the max age alone needs (everyone once per max age). */
  maxAgeNeedsPerDay: number;
}

/**
 * The threshold μ that spends `budgetPerDay` syncs a day on a population of rates, where every
 * interval is capped by the max age: the bisection of a decreasing load on the log scale.
 */
export function solveThreshold(
  groups: readonly RateGroup[],
  budgetPerDay: number,
  base: Pick<PolicyParams, 'maxAgeDays' | 'minIntervalDays'>,
): Threshold {
  const total = groups.reduce((n, g) => n + g.count, 0);
  const maxAgeNeedsPerDay = total / (base.maxAgeDays * MAX_AGE_PLANNED);
  if (maxAgeNeedsPerDay >= budgetPerDay) {
    return {
      thresholdDays: Number.POSITIVE_INFINITY,
      keepsMaxAge: maxAgeNeedsPerDay <= budgetPerDay,
      maxAgeNeedsPerDay,
    };
  }
  const at = (mu: number) => load(groups, { ...base, thresholdDays: mu });
  let lo = Math.log(1e-12);
  let hi = Math.log(1e6);
  if (at(Math.exp(lo)) <= budgetPerDay) return { thresholdDays: 0, keepsMaxAge: true, maxAgeNeedsPerDay };
  for (let i = 0; i < 60; i++) {
    const mid = (lo + hi) / 2;
    if (at(Math.exp(mid)) > budgetPerDay) lo = mid;
    else hi = mid;
  }
  return { thresholdDays: Math.exp(hi), keepsMaxAge: true, maxAgeNeedsPerDay };
}

/** REFRESH_MAX_AGE's default, days. */
const DEFAULT_MAX_AGE_DAYS = 7;

/**
 * The plan before the refresh has made one (or without a refresh): everyone at the max age, from
 * a prior of one change per max age.
 */
export function defaultPolicy(maxAgeDays = DEFAULT_MAX_AGE_DAYS): PolicyParams {
  return {
    thresholdDays: Number.POSITIVE_INFINITY,
    maxAgeDays,
    minIntervalDays: 0,
    prior: { ratePerDay: 1 / maxAgeDays, weight: PRIOR_WEIGHT, forgetDays: forgetDaysFor(maxAgeDays) },
  };
}

/** The refresh's shared plan as stored (`refresh_policy`, db/refresh/policy.ts), as far as the workers read it. */
export interface StoredPlan {
  /** μ in days; null when the budget cannot sync everyone even once per max age. */
  thresholdDays: number | null;
  priorRatePerDay: number;
  priorMixture: RateMixture | null;
}

/** The parameters a stored plan (or none yet: {@link defaultPolicy}) gives, under this process's max age. */
export function policyParams(stored: StoredPlan | undefined, maxAgeMs: number): PolicyParams {
  const maxAgeDays = maxAgeMs / MS_PER_DAY;
  if (!stored) return defaultPolicy(maxAgeDays);
  return {
    thresholdDays: stored.thresholdDays ?? Number.POSITIVE_INFINITY,
    maxAgeDays,
    minIntervalDays: 0,
    prior: {
      ratePerDay: stored.priorRatePerDay,
      weight: PRIOR_WEIGHT,
      mixture: stored.priorMixture,
      forgetDays: forgetDaysFor(maxAgeDays),
    },
  };
}
