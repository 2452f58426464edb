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

/** Days the observations cover: from the first answer they follow to the latest. */
function watchedDays(observations: readonly Observation[] | null | undefined): number {
  let days = 0;
  for (const o of observations ?? []) if (Number.isFinite(o)) days += Math.abs(o);
  return days;
}

/**
 * The group a subscriber's evidence puts it in: the newest card's age on a log scale, two groups
 * a decade (from under 9 seconds to over 27 years: the scale is absolute, since the rates it
 * separates are), or `none` without a dated card.
 *
 * With the subscriber's observations, the age is the one its first watched answer read, the
 * latest's less the days watched since; and a newest card younger than the watch was added during
 * it, so it hides what the first answer said: null, no group, as without evidence. A card the
 * refresh saw arrive is a change its observations already hold; read as evidence too, it counted
 * twice, and it sorted the subscribers by their own observations: the groups of old cards were
 * those not yet seen adding one, each fitted a quieter mixture than its wallets had, and where
 * createDates say nothing of change (the simulator's old-cards world: the cards held 2 to 6 years
 * old, an added one dated at once) the refresh did worse than with no evidence at all. Only the
 * latest observations are kept (src/freshness/observation.ts), so a wallet busy enough to outrun
 * them looks watched for less than it was; its own observations then outweigh any prior.
 */
export function evidenceGroup(
  e: Evidence | null | undefined,
  observations?: readonly Observation[] | null,
): string | null {
  if (!e) return null;
  if (e.newestCardAgeDays === null) return 'none';
  const watched = watchedDays(observations);
  if (watched > 0 && e.newestCardAgeDays <= watched) return null;
  const bucket = Math.floor(2 * Math.log10(Math.max(1e-4, e.newestCardAgeDays - watched)));
  return `age${Math.min(9, Math.max(-8, bucket))}`;
}

/**
 * Pseudo-subscribers of everyone's mixture a group's fit is shrunk towards: a group of n subscribers
 * gets n/(n+m) of its own fit. Small groups stay near everyone's; empty ones are everyone's.
 */
const SHRINK_SUBSCRIBERS = 50;
/** Below this chance of a group, a hidden subscriber is left out of its fit (it would add nothing but time). */
const HIDDEN_LEAST_CHANCE = 1e-3;
/** Below this share of its own fit, a group is everyone's mixture, and is not fitted. */
const LEAST_SHARE = 1e-3;

/** One sampled subscriber: its observations and the evidence of its latest answer. */
export interface EvidenceSample {
  observations: readonly Observation[] | null;
  evidence: Evidence | null;
}

/**
 * Everyone's mixture (as {@link fitMixture}) and one per evidence group, shrunk towards everyone's;
 * null below the sample a mixture needs. A subscriber whose group is hidden (a card added while
 * watched, {@link evidenceGroup}) counts in every group by the chance that group gives its
 * observations: hidden by what the observations show, a group is missing at random given them, and
 * a fit of the subscribers whose group is known alone is biased (towards those not seen adding a
 * card, the quieter ones). The chances are read from those fits, once: EM run on to its fixed point
 * lets a group that took in busy subscribers take in more, and groups alike in truth (createDates
 * unrelated to change) came apart by chance.
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
  const known = new Map<string, number[][]>();
  const hidden: number[][] = [];
  observed.forEach((s, i) => {
    const key = evidenceGroup(s.evidence, s.observations);
    if (key === null) {
      hidden.push(likelihoods[i]!);
      return;
    }
    const list = known.get(key) ?? [];
    list.push(likelihoods[i]!);
    known.set(key, list);
  });
  if (known.size === 0) return { ratesPerDay, weights };
  const names = [...known.keys()].sort();
  const own = names.map((key) => emWeights(known.get(key)!, weights));
  const knownPooled = emWeights([...known.values()].flat(), weights);
  // Each hidden subscriber's chance of each group: the group's share of the known ones, times how
  // likely the group's own fit makes its observations.
  const chances = hidden.map((l) => {
    const p = names.map((key, g) => known.get(key)!.length * dot(own[g]!, l));
    const total = p.reduce((a, b) => a + b, 0);
    return total > 0 ? p.map((x) => x / total) : p.map(() => 0);
  });
  const groups: Record<string, number[]> = {};
  names.forEach((key, g) => {
    const rows = [...known.get(key)!];
    const counts = rows.map(() => 1);
    hidden.forEach((l, i) => {
      if (chances[i]![g]! < HIDDEN_LEAST_CHANCE) return;
      rows.push(l);
      counts.push(chances[i]![g]!);
    });
    const size = counts.reduce((a, b) => a + b, 0);
    const share = (groupTrust(known.get(key)!, own[g]!, knownPooled) * size) / (size + SHRINK_SUBSCRIBERS);
    // Fitting is most of the time, and where the evidence says nothing, most groups are everyone's.
    if (share < LEAST_SHARE) {
      groups[key] = [...weights];
      return;
    }
    const fitted = emWeights(rows, weights, counts);
    groups[key] = fitted.map((w, j) => share * w + (1 - share) * weights[j]!);
  });
  return { ratesPerDay, weights, groups };
}

/**
 * The chance that a group's mixture is not everyone's, by the Bayesian information criterion: the
 * log-likelihood its known subscribers gain under their own fit over all known subscribers' fit
 * (`pooled`), less ln n (two parameters' worth), read as log odds: 1/(1 + n e^{−gain}). Known
 * subscribers only: what the hidden ones add to a group depends on the groups' fits, and groups
 * alike in truth drew apart by it, each confirmed by its share of them. Where createDates say
 * nothing, a group of a thousand gains a few nats by fitting its noise (the simulator's control
 * and old-cards worlds: 0 to 4) and is everyone's within a few percent; where they do, groups of
 * hundreds gain tens to hundreds.
 */
function groupTrust(rows: readonly number[][], own: readonly number[], pooled: readonly number[]): number {
  let gain = 0;
  for (const l of rows) gain += Math.log(Math.max(1e-300, dot(own, l)) / Math.max(1e-300, dot(pooled, l)));
  return 1 / (1 + rows.length * Math.exp(-Math.min(700, gain)));
}

/** Σ aᵢbᵢ. */
function dot(a: readonly number[], b: readonly number[]): number {
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += a[i]! * b[i]!;
  return sum;
}

/**
 * The mixture a subscriber's estimate starts from: its evidence group's, or everyone's. With its
 * observations, the group is the first watched answer's ({@link evidenceGroup}).
 */
export function mixtureFor(
  mixture: RateMixture,
  evidence: Evidence | null | undefined,
  observations?: readonly Observation[] | null,
): Pick<RateMixture, 'ratesPerDay' | 'weights'> {
  const key = evidenceGroup(evidence, observations);
  const weights = key === null ? undefined : mixture.groups?.[key];
  return { ratesPerDay: mixture.ratesPerDay, weights: weights ?? mixture.weights };
}
