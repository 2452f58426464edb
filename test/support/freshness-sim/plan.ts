import {
  type AuditAction,
  type EvidenceSample,
  evidenceGroup,
  FORGET_MAX_AGES,
  fitGroupedMixture,
  groupRates,
  intervalDays,
  MS_PER_DAY,
  type Observation,
  PLANNED_SHARE,
  type PolicyParams,
  type Population,
  PRIOR_WEIGHT,
  plannedRates,
  pooledRate,
  type RateMixture,
  refitPrior,
  solveThreshold,
  type Threshold,
} from '../../../src/freshness/index.js';
import type { Copies } from './copies.js';
import type { BenchPolicy, PolicyName, SimOptions } from './types.js';
import type { World } from './world.js';

// The policy's plan, made as production makes it (src/freshness/): the prior from a sample of
// observations, the threshold from the rates; the oracle's from the true rates instead. Between
// the two, the class learner (`classPrior`): the continuous policy, but its prior mixture is the
// world's true mixture of rates, with no evidence groups; each wallet's class is still learnt from
// its own syncs by the same posterior. What it loses to the oracle is the cost of learning the
// members. `class-learner-evidence` is given besides each createDate evidence group's true
// mixture, where the continuous policy fits one: what the continuous policy loses to it is the
// cost of fitting the mixture.

/**
 * The world's true mixture of rates now (the classes and their shares, and the woken rate once the
 * wallets have woken): the class learner's prior. Rate 0 (never) is a point of its grid: one
 * change seen rules it out.
 */
function trueMixture(trueRate: Float64Array, groupOf?: (id: number) => string | null): RateMixture {
  const shares = (ids: number[], grid: number[]) => {
    const counts = new Map<number, number>();
    for (const id of ids) counts.set(trueRate[id]!, (counts.get(trueRate[id]!) ?? 0) + 1);
    return grid.map((r) => (counts.get(r) ?? 0) / ids.length);
  };
  const everyone = Array.from(trueRate, (_, id) => id);
  const ratesPerDay = [...new Set(trueRate)].sort((a, b) => a - b);
  const mixture: RateMixture = { ratesPerDay, weights: shares(everyone, ratesPerDay) };
  if (!groupOf) return mixture;
  const members = new Map<string, number[]>();
  for (const id of everyone) {
    const key = groupOf(id);
    if (key === null) continue;
    const list = members.get(key) ?? [];
    list.push(id);
    members.set(key, list);
  }
  mixture.groups = Object.fromEntries([...members].map(([key, ids]) => [key, shares(ids, ratesPerDay)]));
  return mixture;
}

/**
 * The policy `simulate` runs for a name of bench/freshness.ts, and the options it adds: the class
 * learner is the continuous policy (the same schedule, audit and estimate) with the true mixture
 * as its prior.
 */
export function runAs<O extends SimOptions>(policy: BenchPolicy, o: O): { policy: PolicyName; options: O } {
  if (policy === 'class-learner') return { policy: 'continuous', options: { ...o, classPrior: 'classes' } };
  if (policy === 'class-learner-evidence') {
    return { policy: 'continuous', options: { ...o, classPrior: 'by-evidence' } };
  }
  return { policy, options: o };
}

/** What a plan sets beside its threshold: its coverage interval, if any, and its shortest interval. */
function coverage(t: Threshold): Pick<PolicyParams, 'coverageDays' | 'minIntervalDays'> {
  return {
    ...(t.coverageDays !== undefined ? { coverageDays: t.coverageDays } : {}),
    minIntervalDays: t.minIntervalDays,
  };
}

export interface Plan {
  /** The parameters of the last plan. */
  readonly params: PolicyParams;
  /** Where the last plan spends the budget (src/freshness/schedule.ts `Threshold`). */
  readonly spend: Threshold['spend'];
  /** How the last plan acted on the audit. */
  readonly audit: AuditAction;
  /** False once a plan could not keep the max age within the budget. */
  readonly keepsMaxAge: boolean;
  /** The share of its syncs the last plan expected to find changed (`Threshold.changedShare`). */
  readonly changedShare: number;
  /** Plans anew with what the copies say at `at`. */
  replan(at: number): void;
  /** When the oracle syncs a wallet next, synced at `now`; the others: now. */
  dueOf(id: number, now: number): number;
}

export function createPlan(
  policy: PolicyName,
  o: SimOptions,
  world: World,
  copies: Copies,
  random: () => number,
  /** How the continuous policy's plan acts on the audit at `at`, its prior's pooled rate given. */
  judgeAudit?: (at: number, population: Population) => AuditAction,
  /** The audit's draws of the last max age at `at`, as observations. */
  auditDraws?: (at: number) => Observation[],
): Plan {
  const n = o.subscribers;
  const { trueRate } = world;
  const { observations } = copies;
  // Read at each plan: a retune (SimOptions.retune) changes the budget and max age of `o` in place.
  let forgetDays = o.maxAgeDays * (o.forgetMaxAges ?? FORGET_MAX_AGES);
  let base = { maxAgeDays: o.maxAgeDays, minIntervalDays: 0 };
  const budgetShare = policy === 'continuous' && !o.auditOnTop ? 1 - o.auditShare : 1;
  let params: PolicyParams = {
    ...base,
    thresholdDays: Number.POSITIVE_INFINITY,
    prior: { ratePerDay: 1 / o.maxAgeDays, weight: o.priorWeight ?? PRIOR_WEIGHT, forgetDays },
  };
  let keepsMaxAge = true;
  let spend: Threshold['spend'] = { plan: 1, coverage: 0 };
  let audit: AuditAction = 'none';
  let changedShare = 0;
  return {
    get params() {
      return params;
    },
    get spend() {
      return spend;
    },
    get audit() {
      return audit;
    },
    get keepsMaxAge() {
      return keepsMaxAge;
    },
    get changedShare() {
      return changedShare;
    },
    replan(planAt) {
      // Round robin and the nightly sweep in id order read no plan.
      if (policy === 'round-robin' || policy === 'nightly-id-order') return;
      forgetDays = o.maxAgeDays * (o.forgetMaxAges ?? FORGET_MAX_AGES);
      base = { maxAgeDays: o.maxAgeDays, minIntervalDays: 0 };
      if (policy === 'oracle') {
        // The oracle knows every rate: no floor on an interval, the optimum the others are held to.
        const t = solveThreshold(groupRates(trueRate), o.budgetPerDay, { ...base, minStaleChance: 0 });
        params = { ...params, ...coverage(t), thresholdDays: t.thresholdDays, minStaleChance: 0 };
        keepsMaxAge &&= t.keepsMaxAge;
        return;
      }
      if (o.classPrior) {
        // The class learner: the true mixture, the mean rate beside it for a subscriber not yet estimated.
        const mixture = trueMixture(
          trueRate,
          o.classPrior === 'by-evidence' ? (id) => evidenceGroup(copies.evidenceAt(id, planAt)) : undefined,
        );
        const prior = {
          ratePerDay: mixture.ratesPerDay.reduce((sum, r, j) => sum + r * mixture.weights[j]!, 0),
          weight: o.priorWeight ?? PRIOR_WEIGHT,
          forgetDays,
          ...(o.changePointHazard !== undefined ? { changePointHazard: o.changePointHazard } : {}),
          mixture,
        };
        const rates = plannedRates(
          observations.map((obs, id) => ({ observations: obs, evidence: copies.evidenceAt(id, planAt) })),
          prior,
          params,
        );
        const t = solveThreshold(groupRates(rates), o.budgetPerDay * budgetShare * PLANNED_SHARE, base);
        params = { ...base, ...coverage(t), thresholdDays: t.thresholdDays, prior };
        keepsMaxAge &&= t.keepsMaxAge;
        return;
      }
      // As production does: the prior from a sample of observations, the threshold from the rates.
      // Of the subscribers the service holds, as production samples its table: an intake's
      // subscribers count once they arrive, not before.
      const held: number[] = [];
      for (let id = 0; id < n; id++) if (copies.known[id]) held.push(id);
      const sample: (Observation[] | null)[] = [];
      const withEvidence: EvidenceSample[] = [];
      for (let k = 0; k < Math.min(n, 20_000); k++) {
        const id = held.length === n ? Math.floor(random() * n) : held[Math.floor(random() * held.length)]!;
        sample.push(observations[id]!);
        withEvidence.push({ observations: observations[id]!, evidence: copies.evidenceAt(id, planAt) });
      }
      const pooled = pooledRate(sample, 1 / o.maxAgeDays);
      const prior = {
        ratePerDay: pooled,
        weight: o.priorWeight ?? PRIOR_WEIGHT,
        forgetDays,
        ...(o.changePointHazard !== undefined ? { changePointHazard: o.changePointHazard } : {}),
        mixture: o.mixture === false ? null : fitGroupedMixture(withEvidence, pooled, forgetDays),
      };
      // Every subscriber's rate as its next sync will estimate it (production solves on a sample).
      const rates = plannedRates(
        held.map((id) => ({ observations: observations[id]!, evidence: copies.evidenceAt(id, planAt) })),
        prior,
        params,
      );
      audit = judgeAudit?.(planAt, prior) ?? 'none';
      const refit = audit === 'estimate-high' ? refitPrior(prior, auditDraws?.(planAt) ?? []) : null;
      if (audit === 'estimate-high' && !refit) audit = 'round-robin';
      const planPrior = refit ?? prior;
      const planRates = refit
        ? plannedRates(
            held.map((id) => ({ observations: observations[id]!, evidence: copies.evidenceAt(id, planAt) })),
            refit,
            params,
          )
        : rates;
      const t = solveThreshold(
        groupRates(planRates),
        o.budgetPerDay * budgetShare * PLANNED_SHARE,
        base,
        refit ? 'none' : audit,
      );
      params = { ...base, ...coverage(t), thresholdDays: t.thresholdDays, prior: planPrior };
      spend = t.spend;
      changedShare = t.changedShare;
      keepsMaxAge &&= t.keepsMaxAge;
    },
    dueOf: (id, now) => (policy === 'oracle' ? now + intervalDays(trueRate[id]!, params) * MS_PER_DAY : now),
  };
}
