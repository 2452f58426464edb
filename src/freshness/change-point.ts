import { posteriorMeanRate, type RateMixture } from './mixture.js';
import type { Observation } from './observation.js';

// Re-learning after a change of habit: a wallet quiet for months that starts changing.
// Forgetting (τ) lets old quiet fade, but slowly; here the estimate also asks whether the
// wallet's recent observations come from a rate of their own. A change point may sit before any
// observation; the current regime's rate and the one before are each drawn from the population's
// mixture (a product partition model with one break at most, as Barry & Hartigan, and Adams &
// MacKay's online change-point detection truncated to the latest break). The estimate is the
// posterior mean rate of the current regime, averaged over where the break is, or none. Pure.

/**
 * The prior chance of a break before each observation ({@link RatePrior.changePointHazard}'s
 * default): 0, off, until the simulator shows it pays (docs/benchmarks.md,
 * "npm run bench:freshness").
 */
export const CHANGE_POINT_HAZARD = 0;

/** log Σ exp(xᵢ), finite or −∞. */
function logSumExp(xs: readonly number[]): number {
  const top = Math.max(...xs);
  if (!Number.isFinite(top)) return top;
  let sum = 0;
  for (const x of xs) sum += Math.exp(x - top);
  return top + Math.log(sum);
}

/**
 * Each observation's log-likelihood at each rate of the grid, weighted by forgetting as
 * `summarize` weighs it (ages measured back from the list's end), oldest observation first.
 */
function terms(observations: readonly Observation[], ratesPerDay: readonly number[], forgetDays?: number) {
  const tau = forgetDays !== undefined && forgetDays > 0 && Number.isFinite(forgetDays) ? forgetDays : 0;
  const out: number[][] = [];
  let age = 0;
  for (let i = observations.length - 1; i >= 0; i--) {
    const o = observations[i]!;
    const t = Math.abs(o);
    if (o < 0) {
      const w = tau > 0 ? Math.exp(-(age + t / 2) / tau) : 1;
      out.push(ratesPerDay.map((r) => w * Math.log(Math.max(1e-300, -Math.expm1(-r * t)))));
    } else {
      const days = tau > 0 ? tau * (Math.exp(-age / tau) - Math.exp(-(age + t) / tau)) : t;
      out.push(ratesPerDay.map((r) => -r * days));
    }
    age += t;
  }
  return out.reverse();
}

/**
 * The posterior mean rate of the wallet's current regime under the mixture, where a break may sit
 * before each observation with prior chance `hazard`. With `hazard` 0 (or fewer than two
 * observations), the posterior mean of {@link posteriorMeanRate}.
 */
export function changePointMeanRate(
  observations: readonly Observation[] | null,
  mixture: Pick<RateMixture, 'ratesPerDay' | 'weights'>,
  forgetDays: number | undefined,
  hazard: number,
): number {
  const obs = (observations ?? []).filter((o) => Number.isFinite(o) && o !== 0);
  const n = obs.length;
  if (n < 2 || !(hazard > 0)) return posteriorMeanRate(observations, mixture, forgetDays);
  const rates = mixture.ratesPerDay;
  const logW = mixture.weights.map((w) => (w > 0 ? Math.log(w) : Number.NEGATIVE_INFINITY));
  const byObservation = terms(obs, rates, forgetDays);
  const total = rates.map((_, j) => byObservation.reduce((sum, t) => sum + t[j]!, 0));
  const h = Math.min(hazard, 0.5 / (n - 1));
  const recent = rates.map(() => 0);
  const scores: number[] = [];
  const means: number[] = [];
  // s: the current regime is observations s…n−1; s = 0 is no break.
  for (let s = n - 1; s >= 0; s--) {
    for (let j = 0; j < rates.length; j++) recent[j]! += byObservation[s]![j]!;
    const joint = recent.map((l, j) => logW[j]! + l);
    const marginal = logSumExp(joint);
    const before = s === 0 ? 0 : logSumExp(total.map((l, j) => logW[j]! + l - recent[j]!));
    scores.push((s === 0 ? Math.log(1 - h * (n - 1)) : Math.log(h)) + marginal + before);
    means.push(joint.reduce((sum, l, j) => sum + Math.exp(l - marginal) * rates[j]!, 0));
  }
  const evidence = logSumExp(scores);
  return scores.reduce((sum, score, k) => sum + Math.exp(score - evidence) * means[k]!, 0);
}
