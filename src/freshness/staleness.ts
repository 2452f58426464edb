// How stale the copy is: the model's estimate and the audit's measurement. Pure.

import { MS_PER_DAY, staleProbability } from './estimate.js';

/** One subscriber as the estimate reads it. */
export interface Copy {
  ratePerDay: number | null;
  lastSuccessAt: number | null;
}

/**
 * The model's expected share of subscribers whose stored cards differ from upstream at `now`:
 * the mean of 1 − e^{−λ·age}. A subscriber never synced counts as stale (nothing is stored), one
 * without an estimate yet at the population's rate.
 */
export function estimatedStaleShare(copies: Iterable<Copy>, now: number, priorRatePerDay: number): number {
  let n = 0;
  let sum = 0;
  for (const c of copies) {
    n += 1;
    sum +=
      c.lastSuccessAt === null
        ? 1
        : staleProbability(c.ratePerDay ?? priorRatePerDay, (now - c.lastSuccessAt) / MS_PER_DAY);
  }
  return n === 0 ? 0 : sum / n;
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
