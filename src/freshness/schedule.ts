import { estimateRate, forgetDaysFor, MS_PER_DAY, PRIOR_WEIGHT, type RatePrior } from './estimate.js';
import { type Evidence, type EvidenceSample, mixtureFor } from './evidence.js';
import { posteriorRateDraw, posteriorStaleRate, posteriorStaleRates, type RateMixture } from './mixture.js';
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
  /**
   * Shortest interval between two syncs of one subscriber, days, for a rate of up to two changes per
   * max age; a faster rate's is shorter in proportion ({@link intervalDays}).
   */
  minIntervalDays: number;
  prior: RatePrior;
  /**
   * The longest interval the plan gives anyone, days, when it is shorter than {@link MAX_AGE_PLANNED}
   * of the max age: budget the threshold does not need buys coverage (those synced longest ago come
   * round sooner), or the audit disagrees with the estimate and the whole budget goes round in turn.
   * Absent: the max age's.
   */
  coverageDays?: number;
  /**
   * The chance that a copy has changed below which its subscriber is not synced again
   * ({@link MIN_STALE_CHANCE}); 0 for the oracle of the simulator, which knows every rate.
   */
  minStaleChance?: number;
  /**
   * `REFRESH_MAX_AGE` in days where {@link PolicyParams.maxAgeDays} is the stretched one the plan
   * solves under when the budget cannot keep it ({@link STRETCH_CYCLES}): what a wallet's changes
   * per max age are counted in, as the workers count them. Absent: `maxAgeDays`.
   */
  refreshMaxAgeDays?: number;
}

/**
 * No subscriber is synced again before its copy is this likely to have changed, at its estimated
 * rate: about a hundred syncs per expected change at most. Without it a budget larger than the plan needs
 * (a small fleet, a long max age) drove the threshold to 0 and every interval with it, and the
 * budget circled the few subscribers with a rate, one sync a second each (docs/refresh.md).
 */
export const MIN_STALE_CHANCE = 0.01;

/**
 * Where the budget cannot sync everyone once per max age, how many of the budget's rounds of the
 * fleet the longest interval is: a wallet that never changes is synced every other round, and the
 * half of the budget that frees goes to the wallets that do change, by their rates. Round robin
 * (everyone once a round) would keep no copy within the max age either, and spends the same on both.
 */
export const STRETCH_CYCLES = 1.5;

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

/** The parameters an interval is computed from. */
export type IntervalParams = Pick<
  PolicyParams,
  'thresholdDays' | 'maxAgeDays' | 'minIntervalDays' | 'coverageDays' | 'minStaleChance' | 'refreshMaxAgeDays'
>;

/**
 * The longest interval the plan gives anyone, days: coverage's when the plan sets one (shorter than
 * the max age's margin, or longer where the budget cannot keep the max age: {@link STRETCH_CYCLES}),
 * otherwise the max age's margin.
 */
function longestIntervalDays(params: Pick<PolicyParams, 'maxAgeDays' | 'coverageDays'>): number {
  return params.coverageDays ?? params.maxAgeDays * MAX_AGE_PLANNED;
}

/** The shortest interval a rate warrants: until the copy is {@link MIN_STALE_CHANCE} likely to have changed. */
function shortestIntervalDays(ratePerDay: number, minStaleChance = MIN_STALE_CHANCE): number {
  if (!(ratePerDay > 0) || !(minStaleChance > 0)) return 0;
  return -Math.log1p(-Math.min(minStaleChance, 0.999)) / ratePerDay;
}

/** The days between two syncs of a subscriber whose cards change `ratePerDay` times a day. */
export function intervalDays(ratePerDay: number, params: IntervalParams): number {
  const { thresholdDays: mu, minIntervalDays } = params;
  let days = Number.POSITIVE_INFINITY;
  if (Number.isFinite(mu) && ratePerDay > 0) {
    const y = mu * ratePerDay;
    if (y <= 0) days = 0;
    else if (y < 1) days = hInverse(y) / ratePerDay;
  }
  // A wallet changing n times a max age (n > 2) may be synced n/2 times as often: the floor holds
  // the quiet classes to the fleet's mean, not the fast wallets whose syncs the stale share needs.
  // From n > 1 instead, a class changing 0.72 times a max age, some of it estimated faster, went
  // past the mean's ten times again (bench:freshness-family seed 34544 world 44, 10.6x).
  const perMaxAge = ratePerDay * (params.refreshMaxAgeDays ?? params.maxAgeDays);
  const busy = Number.isFinite(perMaxAge) && perMaxAge > 2 ? perMaxAge / 2 : 1;
  const floor = Math.max(minIntervalDays / busy, shortestIntervalDays(ratePerDay, params.minStaleChance));
  return Math.min(longestIntervalDays(params), Math.max(floor, days));
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
  /**
   * The rate the estimate of the stale share reads for this copy until its next sync: the one that
   * keeps it stale over its planned interval as long as its posterior does (mixture.ts
   * `posteriorStaleRate`); null without a mixture, where the estimate reads the mean.
   */
  staleRatePerDay: number | null;
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
  const { ratePerDay, staleRateAt, planRate } = posteriorPlan(observations, before.evidence, params);
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
  const days = Math.min(
    intervalDays(planRate, params),
    draw !== undefined ? intervalDays(planned, params) : Number.POSITIVE_INFINITY,
  );
  // Without a mixture there is no posterior to read: the estimate takes the population's rate for
  // one synced once (a sync made before any plan stored the default's), the mean for the others.
  const staleRatePerDay = staleRateAt ? staleRateAt(days) : null;
  return { observations, ratePerDay, staleRatePerDay, nextRefreshAt: now + days * MS_PER_DAY };
}

/**
 * A subscriber's posterior under the plan's prior, read once: its mean rate, its stale rate at any
 * interval (null without a mixture), and the rate it is planned by ({@link planningRate}).
 */
function posteriorPlan(
  observations: readonly Observation[] | null,
  evidence: Evidence | null | undefined,
  params: PolicyParams,
): { ratePerDay: number; staleRateAt: ((days: number) => number) | null; planRate: number } {
  const ratePerDay = estimateRate(observations, params.prior, evidence);
  const staleRateAt = params.prior.mixture
    ? posteriorStaleRates(
        observations,
        mixtureFor(params.prior.mixture, evidence, observations),
        params.prior.forgetDays,
      )
    : null;
  const planRate = staleRateAt ? staleRateAt(intervalDays(ratePerDay, params)) : ratePerDay;
  return { ratePerDay, staleRateAt, planRate };
}

/**
 * The stale rate a sync under `params` would store for a subscriber with these observations and
 * this evidence (as {@link afterSuccess} does, without exploration); null without a mixture. For a
 * subscriber synced before the plan had a mixture, whose row holds none: the estimate would count
 * it at its mean rate until its next sync, a round of the fleet away where the budget syncs each
 * copy less than once a max age, and read a third or more above the truth (docs/refresh.md, "How
 * stale is the copy?").
 */
export function staleRateOf(
  observations: readonly Observation[] | null,
  evidence: Evidence | null | undefined,
  params: PolicyParams,
): number | null {
  const { staleRateAt, planRate } = posteriorPlan(observations, evidence, params);
  return staleRateAt ? staleRateAt(intervalDays(planRate, params)) : null;
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
export function plannedRates(
  samples: readonly EvidenceSample[],
  prior: RatePrior,
  /** The plan in force's intervals, at which each rate is taken ({@link planningRate}); absent: the means. */
  inForce?: IntervalParams,
): number[] {
  return samples.map((s) =>
    inForce
      ? planningRate(s.observations, prior, s.evidence, inForce)
      : estimateRate(s.observations, prior, s.evidence),
  );
}

/**
 * The rate a subscriber is planned by: the one that keeps its copy stale over its interval as long
 * as its posterior does (mixture.ts `posteriorStaleRate`), taken at the interval its mean rate gets
 * under `params`; without a mixture, the mean. Not the mean itself: a little chance of a fast
 * wallet raises the mean far more than the chance of a change, so that a wallet watched once or
 * twice was synced as often as the fast one it is unlikely to be, and one likely quiet but possibly
 * beyond keeping fresh was left to the max age with the fast (docs/refresh.md, "What the refresh
 * promises"). `afterSuccess` plans by it, `plannedRates` solves the threshold on it, and `pullIn`
 * pulls the subscribers seen once in to it.
 */
function planningRate(
  observations: readonly Observation[] | null,
  prior: RatePrior,
  evidence: Evidence | null | undefined,
  params: IntervalParams,
  mean = estimateRate(observations, prior, evidence),
): number {
  if (!prior.mixture) return mean;
  return posteriorStaleRate(
    observations,
    mixtureFor(prior.mixture, evidence, observations),
    intervalDays(mean, params),
    prior.forgetDays,
  );
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

/** How the plan acts on the audit: `round-robin` when the audit's interval excludes the estimate. */
export type AuditAction = 'none' | 'round-robin' | 'estimate-high';

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
  /** {@link PolicyParams.coverageDays}; null (or absent, a plan stored before it) when none is set. */
  coverageDays?: number | null;
  /** {@link PolicyParams.minIntervalDays}; null (or absent, a plan stored before it): none. */
  minIntervalDays?: number | null;
}

/** The parameters a stored plan (or none yet: {@link defaultPolicy}) gives, under this process's max age. */
export function policyParams(stored: StoredPlan | undefined, maxAgeMs: number): PolicyParams {
  const maxAgeDays = maxAgeMs / MS_PER_DAY;
  if (!stored) return defaultPolicy(maxAgeDays);
  return {
    thresholdDays: stored.thresholdDays ?? Number.POSITIVE_INFINITY,
    maxAgeDays,
    minIntervalDays: stored.minIntervalDays ?? 0,
    ...(stored.coverageDays ? { coverageDays: stored.coverageDays } : {}),
    prior: {
      ratePerDay: stored.priorRatePerDay,
      weight: PRIOR_WEIGHT,
      mixture: stored.priorMixture,
      forgetDays: forgetDaysFor(maxAgeDays),
    },
  };
}

/** What a new plan pulls in of the due times planned under the one before ({@link pullIn}). */
export interface PullIn {
  /** Every due time later than a subscriber's last success plus this (days) is pulled in to it. */
  longestDays: number;
  /**
   * A subscriber seen once (no observation of its own) is pulled in to its last success plus this
   * (days): the interval the population's rate asks for under the new plan. Null when it asks no
   * sooner than the plan before did, so nothing of that kind is read.
   */
  seenOnceDays: number | null;
  /**
   * When the new plan goes round in turn because the plan in force's own syncs found far more
   * changed than it expected (every token reissued): every due time sooner than its subscriber's
   * last success plus this (days) is put back to it, so that the claim, earliest due first, takes
   * them in the order they were last synced. Null otherwise. Each such plan asks it again: once the
   * due times are in turn it moves none, and a pass cut short (a restart) is finished by the next such plan.
   */
  inTurnDays: number | null;
}

/**
 * Whether the new plan goes round in turn (`auditAction` `round-robin`), and whether the plan in
 * force's own syncs found far more changed than it expected (src/freshness/staleness.ts
 * `syncsDisagree`), as every token reissued makes them.
 */
export interface GoesRound {
  roundRobin: boolean;
  syncsMissed: boolean;
}

/**
 * What a new plan pulls in. A due time is planned once, at a sync, under the plan of the day; a
 * plan that asks sooner (a lowered max age, budget the plan no longer needs going to coverage, the
 * audit's disagreement, a population rate learnt higher) would otherwise wait for every due time
 * planned under the old one. A subscriber synced before any plan was made (everyone at the max
 * age) or under a population rate since learnt higher is one it knows little about: it is planned
 * at what the population now tells, not left where the old plan put it. A plan that goes round in
 * turn because the plan in force's own syncs found nearly everything changed ({@link GoesRound})
 * puts back the due times its rates had planned sooner than the round: after every token is
 * reissued, the copies synced before the event are the stale ones, and a busy wallet synced seconds
 * after it would otherwise come round again ahead of them. Not when the audit alone disagrees (a
 * wake-up): the busy wallets are still busy, and put back to the round they went stale, which sent
 * the next plan round in turn again (docs/refresh.md "When the audit disagrees").
 */
export function pullIn(
  before: PolicyParams | undefined,
  after: PolicyParams,
  goesRound: GoesRound = { roundRobin: false, syncsMissed: false },
): PullIn {
  const longestDays = longestIntervalDays(after);
  const seenOnce = intervalDays(planningRate(null, after.prior, null, after), after);
  const seenOnceBefore = before
    ? intervalDays(planningRate(null, before.prior, null, before), before)
    : Number.POSITIVE_INFINITY;
  // A fifth shorter at least: the population's rate moves a little at every plan.
  return {
    longestDays,
    seenOnceDays: seenOnce < Math.min(longestDays, 0.8 * seenOnceBefore) ? seenOnce : null,
    inTurnDays: goesRound.roundRobin && goesRound.syncsMissed ? longestDays : null,
  };
}

/**
 * How many of those due soonest a claim reads to choose among, with `count` syncs left over: twenty
 * a sync, at least 200, at most 5,000 (a bounded range of the schedule's index, whatever the fleet).
 */
export function aheadWindow(count: number): number {
  return Math.min(5000, Math.max(200, count * 20));
}

/** A subscriber not yet due, as the claim reads it: its due time and last success (ms). */
export interface NotYetDue {
  id: number;
  dueAt: number;
  lastSuccessAt: number | null;
}

/**
 * Budget left over once everyone due is handed out goes to those furthest through their intervals:
 * (now − last success) / (due − last success), the largest first. By due time alone, a subscriber
 * with a short interval, synced a moment ago, was again the first not yet due, and the budget went
 * round it once a tick while everyone else waited (docs/refresh.md, "What the refresh promises").
 * Returns the ids of `count` of them (fewer when there are fewer).
 */
export function chooseAhead(rows: readonly NotYetDue[], count: number, now: number): number[] {
  if (count <= 0) return [];
  const through = (r: NotYetDue) =>
    r.lastSuccessAt === null || r.dueAt <= r.lastSuccessAt
      ? 1
      : (now - r.lastSuccessAt) / (r.dueAt - r.lastSuccessAt);
  return rows
    .map((r) => ({ id: r.id, through: through(r), dueAt: r.dueAt }))
    .sort((a, b) => b.through - a.through || a.dueAt - b.dueAt || a.id - b.id)
    .slice(0, count)
    .map((r) => r.id);
}
