import {
  emWeights,
  enoughForMixture,
  gridLikelihoods,
  mixtureGrid,
  type RateMixture,
  summarize,
  thinned,
} from './mixture.js';
import type { Observation } from './observation.js';

// Evidence from the first answer: what every answer carries about how often the wallet
// changes before the refresh has watched it change. Every card carries the day the customer saved
// it, so the newest card's age is the wallet's own history of additions, seen backwards: a wallet
// whose newest card is minutes old has been adding cards lately. Whether it says anything about
// how often the cards change is not assumed: the population's prior is fitted per evidence group
// (empirical Bayes with covariates), each group's mixture from the observations of its own
// subscribers, shrunk towards everyone's. Where createDates are unrelated to change, every group
// fits the same mixture and the evidence changes nothing. Pure: the evidence is a plain input.

/** What one answer says about its wallet, at the moment it was read. */
export interface Evidence {
  /** Days from the newest card's createDate to the answer; null: no card (or none dated). */
  newestCardAgeDays: number | null;
  /** Cards the answer listed. */
  cards: number;
}

/** The evidence of an answer read at `nowMs` listing cards with these createDates (ISO strings or Dates). */
export function evidenceOf(cards: readonly { createDate: string | Date }[], nowMs: number): Evidence {
  let newest = Number.NEGATIVE_INFINITY;
  for (const c of cards) {
    const at = c.createDate instanceof Date ? c.createDate.getTime() : Date.parse(c.createDate);
    if (Number.isFinite(at) && at > newest) newest = at;
  }
  return {
    newestCardAgeDays: Number.isFinite(newest) ? Math.max(0, nowMs - newest) / 86_400_000 : null,
    cards: cards.length,
  };
}

/**
 * The group a subscriber's evidence puts it in: the newest card's age on a log scale, two groups
 * a decade (from under 9 seconds to over 27 years: the scale is absolute, since the rates it
 * separates are), or `none` without a dated card.
 */
export function evidenceGroup(e: Evidence | null | undefined): string | null {
  if (!e) return null;
  if (e.newestCardAgeDays === null) return 'none';
  const bucket = Math.floor(2 * Math.log10(Math.max(1e-4, e.newestCardAgeDays)));
  return `age${Math.min(9, Math.max(-8, bucket))}`;
}

/**
 * Pseudo-subscribers of everyone's mixture a group's fit is shrunk towards: a group of n subscribers
 * gets n/(n+m) of its own fit. Small groups stay near everyone's; empty ones are everyone's.
 */
const SHRINK_SUBSCRIBERS = 50;

/** One sampled subscriber: its observations and the evidence of its latest answer. */
export interface EvidenceSample {
  observations: readonly Observation[] | null;
  evidence: Evidence | null;
}

/**
 * Everyone's mixture (as {@link fitMixture}) and one per evidence group: EM from everyone's weights
 * on the group's own subscribers, shrunk towards everyone's. Null below the sample a mixture needs.
 */
export function fitGroupedMixture(
  samples: readonly EvidenceSample[],
  centerRatePerDay: number,
  forgetDays?: number,
): RateMixture | null {
  const withObservations = samples.filter((s) => s.observations !== null && s.observations.length > 0);
  if (!enoughForMixture(withObservations.length, samples.length) || !(centerRatePerDay > 0)) return null;
  const observed = thinned(withObservations);
  const ratesPerDay = mixtureGrid(centerRatePerDay);
  const likelihoods = gridLikelihoods(
    observed.map((s) => summarize(s.observations!, forgetDays)),
    ratesPerDay,
  );
  const weights = emWeights(
    likelihoods,
    ratesPerDay.map(() => 1 / ratesPerDay.length),
  );
  const members = new Map<string, number[][]>();
  observed.forEach((s, i) => {
    const key = evidenceGroup(s.evidence);
    if (key === null) return;
    const list = members.get(key) ?? [];
    list.push(likelihoods[i]!);
    members.set(key, list);
  });
  const groups: Record<string, number[]> = {};
  for (const [key, ls] of members) {
    const own = emWeights(ls, weights);
    const share = ls.length / (ls.length + SHRINK_SUBSCRIBERS);
    groups[key] = own.map((w, j) => share * w + (1 - share) * weights[j]!);
  }
  return { ratesPerDay, weights, groups };
}

/** The mixture a subscriber's estimate starts from: its evidence group's, or everyone's. */
export function mixtureFor(
  mixture: RateMixture,
  evidence: Evidence | null | undefined,
): Pick<RateMixture, 'ratesPerDay' | 'weights'> {
  const key = evidenceGroup(evidence);
  const weights = key === null ? undefined : mixture.groups?.[key];
  return { ratesPerDay: mixture.ratesPerDay, weights: weights ?? mixture.weights };
}
