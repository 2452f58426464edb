import type { Observation } from './estimate.js';

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
}

/** Grid points per decade, and decades either side of the population's pooled rate. */
const PER_DECADE = 3;
const DECADES = 4;
/** The fewest subscribers with observations a mixture is fitted from. */
export const MIXTURE_MIN_SUBSCRIBERS = 50;
const ITERATIONS = 100;
/** The most subscribers the weights are fitted to (the sample is random: more adds time, not much else). */
const MIXTURE_MAX_SUBSCRIBERS = 5000;

interface Summary {
  changed: number[];
  unchangedDays: number;
}

function summarize(observations: readonly Observation[]): Summary {
  const changed: number[] = [];
  let unchangedDays = 0;
  for (const o of observations) {
    if (!Number.isFinite(o) || o === 0) continue;
    if (o < 0) changed.push(-o);
    else unchangedDays += o;
  }
  return { changed, unchangedDays };
}

/** log P(observations | rate): unchanged intervals e^{−λt}, changed ones 1 − e^{−λt}. */
function logLikelihood(s: Summary, ratePerDay: number): number {
  let ll = -ratePerDay * s.unchangedDays;
  for (const t of s.changed) ll += Math.log(Math.max(1e-300, -Math.expm1(-ratePerDay * t)));
  return ll;
}

/**
 * Fits the mixing weights on a grid of rates around `centerRatePerDay` (4 decades each way, 3 points a decade) to the
 * sample's observations; null when fewer than {@link MIXTURE_MIN_SUBSCRIBERS} have any.
 */
export function fitMixture(
  samples: readonly (readonly Observation[] | null)[],
  centerRatePerDay: number,
): RateMixture | null {
  const observed = samples.filter((s): s is readonly Observation[] => s !== null && s.length > 0);
  // Every k-th, not the first ones: a sample read in table order is not shuffled.
  const stride = Math.ceil(observed.length / MIXTURE_MAX_SUBSCRIBERS);
  const summaries = observed.filter((_, i) => i % stride === 0).map(summarize);
  if (summaries.length < MIXTURE_MIN_SUBSCRIBERS || !(centerRatePerDay > 0)) return null;
  const k = 2 * DECADES * PER_DECADE + 1;
  const ratesPerDay = Array.from(
    { length: k },
    (_, i) => centerRatePerDay * 10 ** ((i - DECADES * PER_DECADE) / PER_DECADE),
  );
  // Each subscriber's likelihood at each rate, scaled by its largest (the scale cancels in EM).
  const likelihoods = summaries.map((s) => {
    const ll = ratesPerDay.map((r) => logLikelihood(s, r));
    const top = Math.max(...ll);
    return ll.map((x) => Math.exp(x - top));
  });
  let weights = ratesPerDay.map(() => 1 / k);
  for (let it = 0; it < ITERATIONS; it++) {
    const next = new Array<number>(k).fill(0);
    for (const l of likelihoods) {
      let total = 0;
      for (let j = 0; j < k; j++) total += weights[j]! * l[j]!;
      if (!(total > 0)) continue;
      for (let j = 0; j < k; j++) next[j]! += (weights[j]! * l[j]!) / total;
    }
    weights = next.map((w) => w / likelihoods.length);
  }
  return { ratesPerDay, weights };
}

/** The posterior mean rate of one subscriber under the mixture (the mixture's mean with no data). */
export function posteriorMeanRate(observations: readonly Observation[] | null, mixture: RateMixture): number {
  const s = summarize(observations ?? []);
  const ll = mixture.ratesPerDay.map((r, j) =>
    mixture.weights[j]! > 0 ? Math.log(mixture.weights[j]!) + logLikelihood(s, r) : Number.NEGATIVE_INFINITY,
  );
  const top = Math.max(...ll);
  let total = 0;
  let weighted = 0;
  for (let j = 0; j < ll.length; j++) {
    const p = Math.exp(ll[j]! - top);
    total += p;
    weighted += p * mixture.ratesPerDay[j]!;
  }
  return total > 0 ? weighted / total : mixture.ratesPerDay[0]!;
}

/** Whether a value read back (from `refresh_policy.prior_mixture`) is a usable mixture. */
export function isMixture(value: unknown): value is RateMixture {
  if (typeof value !== 'object' || value === null) return false;
  const { ratesPerDay, weights } = value as Partial<RateMixture>;
  return (
    Array.isArray(ratesPerDay) &&
    Array.isArray(weights) &&
    ratesPerDay.length > 0 &&
    ratesPerDay.length === weights.length &&
    ratesPerDay.every((r) => typeof r === 'number' && r > 0 && Number.isFinite(r)) &&
    weights.every((w) => typeof w === 'number' && w >= 0 && Number.isFinite(w))
  );
}
