// How often a subscriber's cards change, learned from its own syncs (Cho & Garcia-Molina,
// "Estimating frequency of change", TOIT 2003). Pure: no clock, no database, no queue; the
// simulator (bench/freshness.ts) and the workers run this same code.

import { CHANGE_POINT_HAZARD, changePointMeanRate } from './change-point.js';
import { type Evidence, mixtureFor } from './evidence.js';
import type { RateMixture } from './mixture.js';
import { type Observation, SMALLEST_INTERVAL_DAYS } from './observation.js';

/** Days per millisecond: every rate here is per day, every interval in days. */
export const MS_PER_DAY = 86_400_000;

/**
 * Pseudo-changes the population prior is worth. Small, because wallets are heavy-tailed: most
 * never change while a few change daily, and a strong prior at the population's mean would keep
 * the quiet majority looking busy for weeks (bench/freshness.ts: 0.05 against 1 cut the simulated
 * stale share by a fifth, and took the estimate's bias from +45% to within ±10%).
 */
export const PRIOR_WEIGHT = 0.05;

/**
 * The prior every subscriber starts from: the population's pooled change rate, worth `weight`
 * pseudo-changes. A subscriber seen once or never gets about the population's rate; its own
 * observations take over as they accumulate.
 */
export interface RatePrior {
  /** Changes per day of the population (the pooled estimate). */
  ratePerDay: number;
  /** Pseudo-changes the prior is worth ({@link PRIOR_WEIGHT}). */
  weight: number;
  /**
   * The population's mixture of rates (src/freshness/mixture.ts), once a sample is large enough to
   * fit one: then the estimate is the posterior mean under it, and `ratePerDay`/`weight` are unused.
   */
  mixture?: RateMixture | null;
  /**
   * τ in days: an observation a days old counts e^{−a/τ} of itself (src/freshness/mixture.ts
   * `summarize`), so a wallet that changes its habits is re-learned within about τ. Absent: never
   * forgotten (but for the window of {@link OBSERVATIONS_KEPT}).
   */
  forgetDays?: number;
  /**
   * The prior chance of a change of habit before each observation (src/freshness/change-point.ts);
   * absent: {@link CHANGE_POINT_HAZARD}; 0: none.
   */
  changePointHazard?: number;
}

/**
 * τ in max ages ({@link RatePrior.forgetDays}); 0: nothing is forgotten. Off: in the simulator's
 * wake-up scenario forgetting re-learns a woken wallet a little sooner, but no τ
 * reaches the target (a woken wallet is next asked on its quiet schedule, whatever is learnt), and
 * τ = 3 max ages cost the 30-day control world about 9% (1.61% → 1.77% at 5,000 subscribers), where
 * the issue asks for no worse than before. `bench:freshness -- --forget N` measures a τ.
 */
export const FORGET_MAX_AGES = 0;

/** The τ of a max age. */
export function forgetDaysFor(maxAgeDays: number, maxAges = FORGET_MAX_AGES): number {
  return maxAgeDays * maxAges;
}

// Durations go from seconds to weeks (tests compress a week into seconds): the bracket is wide.
const MIN_RATE = 1e-6; // a change in ~2,700 years: "never" for every purpose here
const MAX_RATE = 1e9; // one every 0.1 ms: "always changed" for every purpose here

/**
 * Solves a decreasing function's root in [MIN_RATE, MAX_RATE] by bisection on the log scale:
 * 64 steps take the bracket's ratio of 1e15 to a relative error under 1e-9.
 */
function decreasingRoot(f: (rate: number) => number): number {
  let lo = Math.log(MIN_RATE);
  let hi = Math.log(MAX_RATE);
  if (f(Math.exp(lo)) <= 0) return MIN_RATE;
  if (f(Math.exp(hi)) >= 0) return MAX_RATE;
  for (let i = 0; i < 64; i++) {
    const mid = (lo + hi) / 2;
    if (f(Math.exp(mid)) > 0) lo = mid;
    else hi = mid;
  }
  return Math.exp((lo + hi) / 2);
}

/** t/(e^{λt}−1), with its limit 1/λ for small λt and 0 for large. */
function changedTerm(rate: number, t: number): number {
  const x = rate * t;
  if (x < 1e-8) return 1 / rate;
  if (x > 700) return 0;
  return t / Math.expm1(x);
}

/**
 * The change rate (per day) of a Poisson process watched at irregular intervals, as the maximum a
 * posteriori estimate under a Gamma prior: the root of
 *   Σ_changed tᵢ/(e^{λtᵢ}−1) + w/λ = Σ_unchanged tⱼ + w/r₀
 * (the likelihood's score, as in Cho & Garcia-Molina's irregular-interval estimator, plus the
 * prior's: shape 1+w, rate w/r₀, so that with no observation the estimate is r₀). Unlike the
 * plain ratio changes/time, it does not read two changes in one long interval as one. Under a
 * mixture, the posterior mean instead, from the mixture of the subscriber's evidence group.
 */
export function estimateRate(
  observations: readonly Observation[] | null,
  prior: RatePrior,
  evidence?: Evidence | null,
): number {
  if (prior.mixture)
    return changePointMeanRate(
      observations,
      mixtureFor(prior.mixture, evidence, observations),
      prior.forgetDays,
      prior.changePointHazard ?? CHANGE_POINT_HAZARD,
    );
  const obs = observations ?? [];
  const w = prior.weight;
  const r0 = Math.min(MAX_RATE, Math.max(MIN_RATE, prior.ratePerDay));
  let unchangedTime = 0;
  const changed: number[] = [];
  for (const o of obs) {
    if (!Number.isFinite(o) || o === 0) continue;
    if (o < 0) changed.push(-o);
    else unchangedTime += o;
  }
  const right = unchangedTime + w / r0;
  return decreasingRoot((rate) => {
    let left = w / rate;
    for (const t of changed) left += changedTerm(rate, t);
    return left - right;
  });
}

/**
 * The population's pooled rate: one rate for every observation of a sample of subscribers, by the
 * same likelihood with no prior. `fallback` when the sample saw nothing.
 */
export function pooledRate(samples: readonly (readonly Observation[] | null)[], fallback: number): number {
  const all = samples.flatMap((s) => s ?? []);
  if (all.length === 0) return fallback;
  const changed = all.filter((o) => o < 0).map((o) => -o);
  if (changed.length === 0) {
    // No change seen at all: the rate is below one change in all the time watched.
    const watched = all.reduce((sum, o) => sum + Math.abs(o), 0);
    return Math.max(MIN_RATE, Math.min(fallback, 0.5 / Math.max(watched, SMALLEST_INTERVAL_DAYS)));
  }
  const unchangedTime = all.filter((o) => o > 0).reduce((sum, o) => sum + o, 0);
  return decreasingRoot((rate) => {
    let left = 0;
    for (const t of changed) left += changedTerm(rate, t);
    return left - unchangedTime;
  });
}

/** The chance that a copy `ageDays` old no longer matches upstream, at `ratePerDay`. */
export function staleProbability(ratePerDay: number, ageDays: number): number {
  if (!(ageDays > 0) || !(ratePerDay > 0)) return 0;
  return -Math.expm1(-ratePerDay * ageDays);
}
