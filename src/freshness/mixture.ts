import type { Observation } from './observation.js';

// The population's prior as a mixture over a grid of rates, fitted to a sample of subscribers'
// observations (empirical Bayes with a nonparametric prior: Kiefer & Wolfowitz's maximum
// likelihood mixing distribution, found by EM on a fixed grid). Wallets are heavy-tailed: most
// never change, a few change daily. A single prior rate, however weak, reads as time watched
// without a change and pulls a busy wallet's estimate down towards the quiet majority (the
// simulator measured a wallet changing 60 times an hour estimated at 11). With the mixture, a
// subscriber's estimate is its posterior mean rate: the quiet stay quiet, and a wallet whose every
// sync finds a change is placed among the busy ones the population is seen to hold. Pure.

export interface RateMixture {
  /** The grid, changes per day, ascending. */
  ratesPerDay: number[];
  /** The prior's weight at each rate; they sum to 1. */
  weights: number[];
  /**
   * The weights of each evidence group (src/freshness/evidence.ts), on the same grid: the prior of
   * a subscriber whose first answer put it in that group. Absent: the one prior for everyone.
   */
  groups?: Record<string, number[]>;
}

/** Grid points per decade, and decades either side of the population's pooled rate. */
const PER_DECADE = 3;
const DECADES = 4;
/** The fewest subscribers with observations a mixture is fitted from. */
const MIXTURE_MIN_SUBSCRIBERS = 50;
/**
 * And the least share of the sampled subscribers that must have observations. The first ones
 * observed are not a sample of the population but whoever was synced twice first: at a refresh's
 * start, the audit's random re-syncs seconds apart, which say little of a quiet wallet and much of
 * a busy one. A mixture fitted to 90 of them (of 10,000) put 4% of the population at 1,400 changes
 * an hour, and its plan pushed everyone else out to the max age (docs/benchmarks.md,
 * "npm run bench:freshness-e2e").
 */
const MIXTURE_MIN_SHARE = 0.02;

/** Whether `observed` of `sampled` subscribers are enough to fit a mixture to. */
export function enoughForMixture(observed: number, sampled: number): boolean {
  return observed >= Math.max(MIXTURE_MIN_SUBSCRIBERS, MIXTURE_MIN_SHARE * sampled);
}
const ITERATIONS = 100;
/** The most subscribers the weights are fitted to (the sample is random: more adds time, not much else). */
const MIXTURE_MAX_SUBSCRIBERS = 5000;

interface Summary {
  /** Changed intervals and the weight each carries (1 without forgetting). */
  changed: number[];
  changedWeights: number[];
  unchangedDays: number;
}

/**
 * The observations as the likelihood reads them. With `forgetDays` (τ), an observation counts
 * e^{−a/τ} of itself, a its age measured back from the list's end (the observations tile the time
 * between syncs, the last ending at the last success): a quiet interval counts
 * τ(e^{−a/τ} − e^{−(a+t)/τ}) days, however many quiet intervals were merged into it, so months of
 * quiet weigh at most τ against this week's changes.
 */
export function summarize(observations: readonly Observation[], forgetDays?: number): Summary {
  const changed: number[] = [];
  const changedWeights: number[] = [];
  let unchangedDays = 0;
  const tau = forgetDays !== undefined && forgetDays > 0 && Number.isFinite(forgetDays) ? forgetDays : 0;
  let age = 0;
  for (let i = observations.length - 1; i >= 0; i--) {
    const o = observations[i]!;
    if (!Number.isFinite(o) || o === 0) continue;
    const t = Math.abs(o);
    if (o < 0) {
      changed.push(t);
      changedWeights.push(tau > 0 ? Math.exp(-(age + t / 2) / tau) : 1);
    } else {
      unchangedDays += tau > 0 ? tau * (Math.exp(-age / tau) - Math.exp(-(age + t) / tau)) : t;
    }
    age += t;
  }
  return { changed, changedWeights, unchangedDays };
}

/** log P(observations | rate): unchanged intervals e^{−λt}, changed ones 1 − e^{−λt}, each weighted. */
function logLikelihood(s: Summary, ratePerDay: number): number {
  let ll = -ratePerDay * s.unchangedDays;
  for (let i = 0; i < s.changed.length; i++) {
    ll += s.changedWeights[i]! * Math.log(Math.max(1e-300, -Math.expm1(-ratePerDay * s.changed[i]!)));
  }
  return ll;
}

/** The grid of rates a mixture is fitted on: 4 decades either side of `centerRatePerDay`, 3 points a decade. */
export function mixtureGrid(centerRatePerDay: number): number[] {
  const k = 2 * DECADES * PER_DECADE + 1;
  return Array.from(
    { length: k },
    (_, i) => centerRatePerDay * 10 ** ((i - DECADES * PER_DECADE) / PER_DECADE),
  );
}

/** Each subscriber's likelihood at each rate of the grid, scaled by its largest (the scale cancels in EM). */
export function gridLikelihoods(summaries: readonly Summary[], ratesPerDay: readonly number[]): number[][] {
  return summaries.map((s) => {
    const ll = ratesPerDay.map((r) => logLikelihood(s, r));
    const top = Math.max(...ll);
    return ll.map((x) => Math.exp(x - top));
  });
}

/**
 * EM for the mixing weights from `start`, {@link ITERATIONS} steps; with `counts`, subscriber i
 * counts counts[i] times (a share of it: the chance it belongs where it is fitted).
 */
export function emWeights(
  likelihoods: readonly number[][],
  start: readonly number[],
  counts?: readonly number[],
): number[] {
  const k = start.length;
  let weights = [...start];
  const total = counts ? counts.reduce((a, b) => a + b, 0) : likelihoods.length;
  if (!(total > 0)) return weights;
  for (let it = 0; it < ITERATIONS; it++) {
    const next = new Array<number>(k).fill(0);
    for (let i = 0; i < likelihoods.length; i++) {
      const l = likelihoods[i]!;
      let sum = 0;
      for (let j = 0; j < k; j++) sum += weights[j]! * l[j]!;
      if (!(sum > 0)) continue;
      const c = counts ? counts[i]! : 1;
      for (let j = 0; j < k; j++) next[j]! += (c * weights[j]! * l[j]!) / sum;
    }
    weights = next.map((w) => w / total);
  }
  return weights;
}

/** Every k-th of the subscribers with observations, at most {@link MIXTURE_MAX_SUBSCRIBERS}. */
export function thinned<T>(items: readonly T[]): T[] {
  const stride = Math.ceil(items.length / MIXTURE_MAX_SUBSCRIBERS);
  return items.filter((_, i) => i % stride === 0);
}

/**
 * Fits the mixing weights on a grid of rates around `centerRatePerDay` (4 decades each way, 3 points a decade) to the
 * sample's observations; null when too few have any ({@link enoughForMixture}).
 */
export function fitMixture(
  samples: readonly (readonly Observation[] | null)[],
  centerRatePerDay: number,
  forgetDays?: number,
): RateMixture | null {
  const observed = samples.filter((s): s is readonly Observation[] => s !== null && s.length > 0);
  // Every k-th, not the first ones: a sample read in table order is not shuffled.
  const summaries = thinned(observed).map((o) => summarize(o, forgetDays));
  if (!enoughForMixture(observed.length, samples.length) || !(centerRatePerDay > 0)) return null;
  const ratesPerDay = mixtureGrid(centerRatePerDay);
  const weights = emWeights(
    gridLikelihoods(summaries, ratesPerDay),
    ratesPerDay.map(() => 1 / ratesPerDay.length),
  );
  return { ratesPerDay, weights };
}

/** The posterior mean rate of one subscriber under the mixture (the mixture's mean with no data). */
export function posteriorMeanRate(
  observations: readonly Observation[] | null,
  mixture: Pick<RateMixture, 'ratesPerDay' | 'weights'>,
  forgetDays?: number,
): number {
  const p = posteriorWeights(observations, mixture, forgetDays);
  let total = 0;
  let weighted = 0;
  for (let j = 0; j < p.length; j++) {
    total += p[j]!;
    weighted += p[j]! * mixture.ratesPerDay[j]!;
  }
  return total > 0 ? weighted / total : mixture.ratesPerDay[0]!;
}

/** The mean over ages 0 to `days` of 1 − e^{−λ·age}: the share of an interval a copy is stale. */
function staleShareOver(ratePerDay: number, days: number): number {
  const x = ratePerDay * days;
  if (!(x > 0)) return 0;
  if (x < 1e-6) return x / 2;
  return 1 + Math.expm1(-x) / x;
}

/**
 * The rate that keeps one subscriber's copy stale, over its planned interval of `days`, as long as
 * its posterior under the mixture does: the estimate's rate (src/freshness/staleness.ts). Not the
 * posterior mean: the posterior of a wallet watched once or twice holds a little of every fast
 * rate, which raises its mean far more than its chance of a change, and the copy's age makes up the
 * difference (Jensen's inequality): in fleets of under one sync per subscriber per max age the
 * estimate read a third above the truth, or more (docs/refresh.md, "How stale is the copy?"). The
 * posterior is the plain mixture's: a change point (`changePointHazard`, off by default) is not in it.
 */
export function posteriorStaleRate(
  observations: readonly Observation[] | null,
  mixture: Pick<RateMixture, 'ratesPerDay' | 'weights'>,
  days: number,
  forgetDays?: number,
): number {
  return posteriorStaleRates(observations, mixture, forgetDays)(days);
}

/**
 * {@link posteriorStaleRate} at any interval, the posterior read once: a sync takes it at two
 * intervals (the one its mean gets, then the one it plans).
 */
export function posteriorStaleRates(
  observations: readonly Observation[] | null,
  mixture: Pick<RateMixture, 'ratesPerDay' | 'weights'>,
  forgetDays?: number,
): (days: number) => number {
  const p = posteriorWeights(observations, mixture, forgetDays);
  let total = 0;
  let mean = 0;
  for (let j = 0; j < p.length; j++) {
    total += p[j]!;
    mean += p[j]! * mixture.ratesPerDay[j]!;
  }
  return (days) => {
    if (!(total > 0)) return mixture.ratesPerDay[0]!;
    if (!(days > 0) || !Number.isFinite(days)) return mean / total;
    let stale = 0;
    for (let j = 0; j < p.length; j++) stale += p[j]! * staleShareOver(mixture.ratesPerDay[j]!, days);
    const target = stale / total;
    if (!(target > 0)) return 0;
    // staleShareOver grows with the rate: bisect on the log scale, from far below the grid's least
    // rate (a grid may hold 0, a wallet that never changes: the simulator's true classes) to its most.
    let lo = Math.log(1e-9 * Math.max(1e-9, mixture.ratesPerDay.find((r) => r > 0) ?? 1e-9));
    let hi = Math.log(Math.max(1e-9, mixture.ratesPerDay.at(-1)!));
    for (let i = 0; i < 60; i++) {
      const mid = (lo + hi) / 2;
      if (staleShareOver(Math.exp(mid), days) < target) lo = mid;
      else hi = mid;
    }
    return Math.exp((lo + hi) / 2);
  };
}

/** One subscriber's posterior over the mixture's grid, unnormalised (the largest weight is 1). */
function posteriorWeights(
  observations: readonly Observation[] | null,
  mixture: Pick<RateMixture, 'ratesPerDay' | 'weights'>,
  forgetDays: number | undefined,
): number[] {
  const s = summarize(observations ?? [], forgetDays);
  const ll = mixture.ratesPerDay.map((r, j) =>
    mixture.weights[j]! > 0 ? Math.log(mixture.weights[j]!) + logLikelihood(s, r) : Number.NEGATIVE_INFINITY,
  );
  const top = Math.max(...ll);
  return ll.map((x) => Math.exp(x - top));
}

/**
 * A rate drawn from one subscriber's posterior under the mixture, by the uniform `u` in [0, 1)
 * (Thompson sampling: the caller's seeded generator, so the draw is a plain input).
 */
export function posteriorRateDraw(
  observations: readonly Observation[] | null,
  mixture: Pick<RateMixture, 'ratesPerDay' | 'weights'>,
  u: number,
  forgetDays?: number,
): number {
  const p = posteriorWeights(observations, mixture, forgetDays);
  let left = u * p.reduce((sum, x) => sum + x, 0);
  for (let j = 0; j < p.length; j++) {
    left -= p[j]!;
    if (left < 0) return mixture.ratesPerDay[j]!;
  }
  return mixture.ratesPerDay.at(-1)!;
}
