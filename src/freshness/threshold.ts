import {
  type AuditAction,
  type IntervalParams,
  intervalDays,
  MAX_AGE_PLANNED,
  type PolicyParams,
  STRETCH_CYCLES,
} from './schedule.js';

// The plan's threshold: the one μ that spends the budget on a population of rates (Cho &
// Garcia-Molina's optimal refresh, src/freshness/schedule.ts), with the max age, coverage and the
// fleet's mean holding every interval. Pure: the simulator solves with this code too.

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
function load(groups: readonly RateGroup[], params: IntervalParams): number {
  let perDay = 0;
  for (const g of groups) perDay += g.count / intervalDays(g.ratePerDay, params);
  return perDay;
}

/**
 * The share of the plan's syncs that should find the cards changed, were the rates right: each
 * group's syncs a day, weighted by the chance that its copy changed in its interval. The refresh
 * holds its own syncs to it between plans (staleness.ts `syncsDisagree`): far more found changed
 * (every token reissued) says the rates are wrong long before the audit's few draws can.
 */
function changedShareOf(groups: readonly RateGroup[], params: IntervalParams): number {
  let syncs = 0;
  let changed = 0;
  for (const g of groups) {
    const days = intervalDays(g.ratePerDay, params);
    if (!(days > 0) || !Number.isFinite(days)) continue;
    syncs += g.count / days;
    changed += (g.count / days) * -Math.expm1(-g.ratePerDay * days);
  }
  return syncs > 0 ? changed / syncs : 0;
}

export interface Threshold {
  thresholdDays: number;
  /** Whether the budget syncs everyone at least once per max age. */
  keepsMaxAge: boolean;
  /** Syncs a day the max age alone needs (everyone once per max age). */
  maxAgeNeedsPerDay: number;
  /** The coverage interval ({@link PolicyParams.coverageDays}), when the plan sets one. */
  coverageDays?: number;
  /**
   * Where the budget goes, as shares of it: `plan`, the syncs the threshold and the max age ask
   * for; `coverage`, the rest, spent on shortening the longest intervals.
   */
  spend: { plan: number; coverage: number };
  /** The share of the plan's syncs expected to find the cards changed ({@link changedShareOf}). */
  changedShare: number;
  /**
   * The shortest interval the plan gives a wallet changing at most twice a max age
   * ({@link PolicyParams.minIntervalDays}; a faster one's is shorter in proportion): the scheduled
   * budget's mean interval over {@link MOST_SYNCS_OF_MEAN}; 0 for the oracle (`minStaleChance` 0).
   */
  minIntervalDays: number;
}

/**
 * No subscriber changing at most twice a max age is planned more often than this many times the
 * fleet's mean (one changing n times a max age, n/2 times that): where the budget is more than the
 * plan needs, the busiest class took it, up to a sync each time its copy became 1% likely to have
 * changed ({@link MIN_STALE_CHANCE}), 13 times the mean in a fleet with no wallet changing even once
 * a max age (bench:freshness-family, docs/refresh.md "What the refresh promises"). The budget that
 * frees goes to coverage.
 */
export const MOST_SYNCS_OF_MEAN = 10;

/**
 * The threshold μ that spends `budgetPerDay` syncs a day on a population of rates, where every
 * interval is capped by the max age: the bisection of a decreasing load on the log scale. When
 * even μ = 0 (every subscriber with a rate at the shortest interval its rate warrants) leaves budget
 * over, the rest buys coverage: the longest interval is shortened until the load spends the budget,
 * so that the subscribers synced longest ago come round sooner, never a busy one faster than its
 * rate warrants. With `audit` `round-robin` (the audit disagrees with the estimate, so the rates
 * cannot be trusted) everyone is planned at the same interval, the budget's: round robin, which no
 * wrong estimate can make worse.
 */
export function solveThreshold(
  groups: readonly RateGroup[],
  budgetPerDay: number,
  base: Pick<PolicyParams, 'maxAgeDays' | 'minIntervalDays' | 'minStaleChance'>,
  audit: AuditAction = 'none',
): Threshold {
  const total = groups.reduce((n, g) => n + g.count, 0);
  const meanDays = total > 0 && budgetPerDay > 0 ? total / budgetPerDay : 0;
  const minIntervalDays =
    base.minStaleChance === 0
      ? base.minIntervalDays
      : Math.max(base.minIntervalDays, meanDays / MOST_SYNCS_OF_MEAN);
  return { ...solveWithin(groups, budgetPerDay, { ...base, minIntervalDays }, audit), minIntervalDays };
}

/** {@link solveThreshold} under a shortest interval of its own. */
function solveWithin(
  groups: readonly RateGroup[],
  budgetPerDay: number,
  base: Pick<PolicyParams, 'maxAgeDays' | 'minIntervalDays' | 'minStaleChance' | 'refreshMaxAgeDays'>,
  audit: AuditAction,
): Omit<Threshold, 'minIntervalDays'> {
  const total = groups.reduce((n, g) => n + g.count, 0);
  const changedShare = (mu: number, coverageDays?: number) =>
    changedShareOf(groups, {
      ...base,
      thresholdDays: mu,
      ...(coverageDays !== undefined ? { coverageDays } : {}),
    });
  const maxAgeNeedsPerDay = total / (base.maxAgeDays * MAX_AGE_PLANNED);
  if (maxAgeNeedsPerDay >= budgetPerDay && audit === 'none' && budgetPerDay > 0 && total > 0) {
    // The budget cannot go round everyone within the max age: everyone at the max age would be
    // round robin, and round robin spends as much on a wallet that never changes as on one that
    // does. The longest interval becomes STRETCH_CYCLES of the budget's round, and the rest of the
    // budget goes by the rates, under the same threshold.
    const longest = (STRETCH_CYCLES * total) / budgetPerDay;
    const t = solveWithin(
      groups,
      budgetPerDay,
      { ...base, maxAgeDays: longest / MAX_AGE_PLANNED, refreshMaxAgeDays: base.maxAgeDays },
      'none',
    );
    return {
      ...t,
      keepsMaxAge: maxAgeNeedsPerDay <= budgetPerDay,
      maxAgeNeedsPerDay,
      coverageDays: t.coverageDays ?? longest,
    };
  }
  if (maxAgeNeedsPerDay >= budgetPerDay) {
    return {
      thresholdDays: Number.POSITIVE_INFINITY,
      keepsMaxAge: maxAgeNeedsPerDay <= budgetPerDay,
      maxAgeNeedsPerDay,
      spend: { plan: 1, coverage: 0 },
      changedShare: changedShare(Number.POSITIVE_INFINITY),
    };
  }
  if (audit !== 'none') {
    return {
      thresholdDays: Number.POSITIVE_INFINITY,
      keepsMaxAge: true,
      maxAgeNeedsPerDay,
      coverageDays: total / budgetPerDay,
      spend: { plan: maxAgeNeedsPerDay / budgetPerDay, coverage: 1 - maxAgeNeedsPerDay / budgetPerDay },
      changedShare: changedShare(Number.POSITIVE_INFINITY, total / budgetPerDay),
    };
  }
  const at = (mu: number, coverageDays?: number) =>
    load(groups, { ...base, thresholdDays: mu, ...(coverageDays !== undefined ? { coverageDays } : {}) });
  const needs = at(0);
  if (needs <= budgetPerDay) {
    // The plan does not need the whole budget: the rest shortens the longest intervals.
    let lo = Math.log(1e-12);
    let hi = Math.log(base.maxAgeDays * MAX_AGE_PLANNED);
    for (let i = 0; i < 60; i++) {
      const mid = (lo + hi) / 2;
      if (at(0, Math.exp(mid)) > budgetPerDay) lo = mid;
      else hi = mid;
    }
    return {
      thresholdDays: 0,
      keepsMaxAge: true,
      maxAgeNeedsPerDay,
      coverageDays: Math.exp(hi),
      spend: { plan: needs / budgetPerDay, coverage: 1 - needs / budgetPerDay },
      changedShare: changedShare(0, Math.exp(hi)),
    };
  }
  let lo = Math.log(1e-12);
  let hi = Math.log(1e6);
  if (at(Math.exp(lo)) <= budgetPerDay)
    return {
      thresholdDays: 0,
      keepsMaxAge: true,
      maxAgeNeedsPerDay,
      spend: { plan: 1, coverage: 0 },
      changedShare: changedShare(0),
    };
  for (let i = 0; i < 60; i++) {
    const mid = (lo + hi) / 2;
    if (at(Math.exp(mid)) > budgetPerDay) lo = mid;
    else hi = mid;
  }
  return {
    thresholdDays: Math.exp(hi),
    keepsMaxAge: true,
    maxAgeNeedsPerDay,
    spend: { plan: 1, coverage: 0 },
    changedShare: changedShare(Math.exp(hi)),
  };
}
