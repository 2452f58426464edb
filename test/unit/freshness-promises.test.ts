import { describe, expect, it } from 'vitest';
import {
  AUDIT_ACTS_FROM,
  auditAction,
  chooseAhead,
  expectationSince,
  groupRates,
  intervalDays,
  MIN_STALE_CHANCE,
  MOST_SYNCS_OF_MEAN,
  MS_PER_DAY,
  observation,
  PLANS_SYNCS_READ,
  type PolicyParams,
  plansSyncsFrom,
  pullIn,
  refitPrior,
  solveThreshold,
  staleEstimate,
  staleProbability,
  syncsDisagree,
} from '../../src/freshness/index.js';

// What the continuous refresh promises in every fleet (docs/refresh.md, "What the refresh
// promises"), held by the pure policy code the workers and the simulator both run.

const prior = { ratePerDay: 12, weight: 0.05 };
const base = { maxAgeDays: 2 / 24, minIntervalDays: 0 };

/** The load of a plan over a population, syncs a day. */
const load = (rates: number[], p: PolicyParams) => rates.reduce((sum, r) => sum + 1 / intervalDays(r, p), 0);

describe('budget the plan does not need', () => {
  // The trial's fleet: 2,880 subscribers, 15 syncs/s, a 2-hour max age; 70% never change.
  const rates = [...Array.from({ length: 2016 }, () => 0), ...Array.from({ length: 864 }, () => 0.5)];
  const budget = 15 * 86_400 * 0.98 * 0.9;

  it('buys coverage: the longest interval shrinks until the budget is spent, and nobody is synced faster than its rate warrants', () => {
    const t = solveThreshold(groupRates(rates), budget, base);
    expect(t.thresholdDays).toBe(0);
    expect(t.coverageDays).toBeLessThan(base.maxAgeDays * 0.9);
    const p: PolicyParams = { ...base, thresholdDays: t.thresholdDays, coverageDays: t.coverageDays!, prior };
    expect(load(rates, p) / budget).toBeCloseTo(1, 2);
    // A wallet changing half a time a day waits until its copy is MIN_STALE_CHANCE likely to have
    // changed, or coverage's interval if that is shorter; today's code planned it at 0 days.
    const busy = intervalDays(0.5, p);
    expect(busy).toBeGreaterThan(0);
    expect(staleProbability(0.5, busy)).toBeLessThanOrEqual(MIN_STALE_CHANCE + 1e-9);
    expect(busy).toBeCloseTo(t.coverageDays!, 9);
    // The quiet ones come round at the coverage interval, the same for all.
    expect(intervalDays(0, p)).toBeCloseTo(t.coverageDays!, 9);
    expect(t.spend.coverage).toBeGreaterThan(0.9);
    expect(t.spend.plan + t.spend.coverage).toBeCloseTo(1, 9);
  });

  it('is none when the plan needs the whole budget: the threshold spends it and the spend says so', () => {
    // Wallets changing 50 times a day, three syncs per subscriber per max age.
    const busier = rates.map((r) => r * 100);
    const t = solveThreshold(groupRates(busier), 3 * rates.length * (24 / 2), base);
    expect(t.thresholdDays).toBeGreaterThan(0);
    expect(t.coverageDays).toBeUndefined();
    expect(t.spend).toEqual({ plan: 1, coverage: 0 });
  });
});

describe('the audit, acted on', () => {
  it('disagreeing beyond the model’s usual error, with enough draws, sends the plan round in turn', () => {
    const audit = { ratio: 0.9, low: 0.85, high: 0.94, samples: 161 };
    expect(auditAction(0.0017, { lastMaxAge: audit })).toBe('round-robin');
    expect(auditAction(0.88, { lastMaxAge: audit })).toBe('none');
    // Within 30% (or 0.3 point) of the interval: a model as wrong as models are is kept.
    expect(auditAction(0.62, { lastMaxAge: audit })).toBe('none');
    expect(auditAction(0.0017, { lastMaxAge: { ...audit, samples: AUDIT_ACTS_FROM - 1 } })).toBe('none');
    expect(auditAction(0.0017, { lastMaxAge: null })).toBe('none');
  });

  it('an estimate above the audit refits the population’s rate from the audit’s own draws; one below goes round in turn', () => {
    // A fleet under one sync per subscriber per max age: most synced once, counted at a population
    // rate learnt from the busier ones the plan syncs most. The audit finds a third of what it says.
    const audit = { ratio: 0.076, low: 0.06, high: 0.094, samples: 400 };
    expect(auditAction(0.137, { lastMaxAge: audit })).toBe('estimate-high');
    expect(auditAction(0.02, { lastMaxAge: audit })).toBe('round-robin');
    // A gross miss of the plan's own syncs (every token reissued) goes round in turn whatever the estimate.
    expect(
      auditAction(0.137, { lastMaxAge: audit, plansSyncs: { samples: 200, changed: 190, expected: 0.1 } }),
    ).toBe('round-robin');
    // The draws: 400 copies 2 days old, one in ten changed. The refit is the rate that makes that so
    // (1 − e^{−2λ} = 0.1), for every subscriber it knows little about, with no mixture.
    const draws = Array.from({ length: 400 }, (_, i) => observation(2, i % 10 === 0));
    const sampled = { ratePerDay: 0.5, weight: 0.05, forgetDays: 30 };
    const refit = refitPrior(sampled, draws);
    expect(refit!.ratePerDay).toBeCloseTo(-Math.log(0.9) / 2, 4);
    expect(refit).toMatchObject({ weight: 0.05, forgetDays: 30, mixture: null });
    // Too few draws to refit from: none, and the plan goes round in turn as before.
    expect(refitPrior(sampled, draws.slice(0, AUDIT_ACTS_FROM - 1))).toBeNull();
    const rates = Array.from({ length: 100 }, (_, i) => (i < 10 ? 5 : 0.01));
    const t = solveThreshold(groupRates(rates), 1000, { maxAgeDays: 1, minIntervalDays: 0 }, 'estimate-high');
    expect(t.thresholdDays).toBe(Number.POSITIVE_INFINITY);
    expect(t.coverageDays).toBeCloseTo(0.1, 9);
  });

  it('the draws since the plan see an event the last max age still dilutes', () => {
    // Every token reissued a minute ago: the last max age's draws are mostly from before it, the
    // plan's own already say every copy changed.
    const lastMaxAge = { ratio: 0.02, low: 0.012, high: 0.033, samples: 600 };
    const sincePlan = { ratio: 1, low: 0.89, high: 1, samples: 32 };
    expect(auditAction(0.02, { lastMaxAge })).toBe('none');
    expect(auditAction(0.02, { lastMaxAge, sincePlan })).toBe('round-robin');
    expect(auditAction(0.02, { lastMaxAge, sincePlan: { ...sincePlan, samples: AUDIT_ACTS_FROM - 1 } })).toBe(
      'none',
    );
  });

  it('the plan’s own syncs, finding far more changed than it expected, act before the audit has drawn enough', () => {
    // 2% of a small budget: the audit has drawn 4 since the plan; the plan's 200 syncs since then
    // found 190 changed where it expected a tenth of them to.
    const sincePlan = { ratio: 1, low: 0.51, high: 1, samples: 4 };
    const plansSyncs = { samples: 200, changed: 190, expected: 0.1 };
    expect(auditAction(0.05, { lastMaxAge: null, sincePlan })).toBe('none');
    expect(auditAction(0.05, { lastMaxAge: null, sincePlan, plansSyncs })).toBe('round-robin');
    // A model a little wrong moves its syncs' share a little: the audit alone judges that.
    expect(syncsDisagree(0.1, { samples: 5000, changed: 1200 })).toBe(false);
    expect(syncsDisagree(0.1, { samples: 5000, changed: 1400 })).toBe(true);
    // Too few syncs, or a plan that expected nothing (an earlier release's), act on nothing.
    expect(syncsDisagree(0.1, { samples: AUDIT_ACTS_FROM - 1, changed: AUDIT_ACTS_FROM - 1 })).toBe(false);
    expect(auditAction(0.05, { lastMaxAge: null, plansSyncs: null })).toBe('none');
  });

  it('every token reissued is seen in the plan’s own syncs even where it expected most of them changed', () => {
    // A budget under one sync per subscriber per max age: the plan expects 55% of its syncs to find a
    // change (twice that is out of reach); after a mass change 60 of its 60 syncs find one.
    expect(syncsDisagree(0.55, { samples: 60, changed: 60 })).toBe(true);
    expect(
      auditAction(0.2, { lastMaxAge: null, plansSyncs: { samples: 60, changed: 60, expected: 0.55 } }),
    ).toBe('round-robin');
    // The same plan a little wrong (65% found where 55% was expected) is the audit's to judge.
    expect(syncsDisagree(0.55, { samples: 2000, changed: 1300 })).toBe(false);
    // Under 30% expected, the rule is what it was: twice the expectation plus 5 points.
    expect(syncsDisagree(0.2, { samples: 5000, changed: 2150 })).toBe(false);
    expect(syncsDisagree(0.2, { samples: 5000, changed: 2400 })).toBe(true);
  });

  it('plans that expect about the same hold their syncs to it together, for a fifth of the max age at most', () => {
    const hour = 3_600_000;
    const maxAgeMs = 24 * hour;
    // Plans every 10 minutes expecting 10%, then 12%: one expectation since the first of them.
    const rates = (expected: number) => ({ expected, roundRobin: false });
    const first = expectationSince(null, rates(0.1), 0);
    expect(first).toEqual({ since: 0, from: 0.1 });
    const second = expectationSince({ ...first, roundRobin: false }, rates(0.12), hour / 6);
    expect(second).toEqual({ since: 0, from: 0.1 });
    // At a sync every 100 seconds, its syncs reach back to then, a fifth of the max age at most
    // (4.8 hours of a day's).
    expect(plansSyncsFrom(second.since, hour / 6, maxAgeMs, 0.01)).toBe(0);
    expect(plansSyncsFrom(second.since, 10 * hour, maxAgeMs, 0.01)).toBe(10 * hour - maxAgeMs / 5);
    // At 15 a second, no further back than the budget takes to make twice the syncs read: the
    // latest 500 are within it, and the read stays a thousand rows.
    expect(plansSyncsFrom(second.since, 10 * hour, maxAgeMs, 15)).toBeCloseTo(
      10 * hour - (2 * PLANS_SYNCS_READ * 1000) / 15,
      6,
    );
    // Held to the share the expectation began at: 12.5% after 12% stays within 30% of 10%, 14%
    // does not, though it is within 30% of 12%; the plan expecting it begins anew.
    expect(expectationSince({ ...second, roundRobin: false }, rates(0.125), hour).since).toBe(0);
    expect(expectationSince({ ...second, roundRobin: false }, rates(0.14), hour)).toEqual({
      since: hour,
      from: 0.14,
    });
    // A plan expecting far more (30% where the one before expected 10%) begins its own expectation;
    // so does a plan that goes round in turn, and the plan after it.
    const before = { since: 0, from: 0.1, roundRobin: false };
    expect(expectationSince(before, rates(0.3), hour).since).toBe(hour);
    expect(expectationSince(before, { expected: 0.1, roundRobin: true }, hour).since).toBe(hour);
    expect(expectationSince({ ...before, roundRobin: true }, rates(0.1), hour).since).toBe(hour);
    // Near zero, within 2 points is about the same.
    expect(expectationSince({ ...before, from: 0.001 }, rates(0.015), hour).since).toBe(0);
  });

  it('a plan says what share of its syncs should find a change: its rates and intervals, weighted by its syncs', () => {
    // Half never change, half change once a max age, a budget of three syncs per subscriber per max age.
    const rates = [
      ...Array.from({ length: 500 }, () => 0),
      ...Array.from({ length: 500 }, () => 1 / base.maxAgeDays),
    ];
    const t = solveThreshold(groupRates(rates), (3 * rates.length) / base.maxAgeDays, base);
    const p: PolicyParams = {
      ...base,
      thresholdDays: t.thresholdDays,
      prior,
      ...(t.coverageDays ? { coverageDays: t.coverageDays } : {}),
    };
    // Each group at its rate as the plan groups it (60 groups a decade).
    let syncs = 0;
    let changed = 0;
    for (const g of groupRates(rates)) {
      const days = intervalDays(g.ratePerDay, p);
      syncs += g.count / days;
      changed += (g.count / days) * staleProbability(g.ratePerDay, days);
    }
    const expected = changed / syncs;
    expect(t.changedShare).toBeGreaterThan(0);
    expect(t.changedShare).toBeCloseTo(expected, 9);
    // Nobody changes: nothing to find.
    expect(solveThreshold(groupRates(rates.map(() => 0)), 1000, base).changedShare).toBe(0);
  });

  it('no subscriber is planned more often than ten times the mean, however much budget the plan leaves, unless it changes more than twice a max age', () => {
    // 980 that never change and 20 changing 0.72 times a max age; three syncs each per max age.
    const rates = [
      ...Array.from({ length: 980 }, () => 0),
      ...Array.from({ length: 20 }, () => 0.72 / base.maxAgeDays),
    ];
    const budget = (3 * rates.length) / base.maxAgeDays;
    const t = solveThreshold(groupRates(rates), budget, base);
    const meanDays = rates.length / budget;
    expect(t.minIntervalDays).toBeCloseTo(meanDays / MOST_SYNCS_OF_MEAN, 12);
    const p: PolicyParams = { ...base, ...t, prior };
    // The busy wallets at ten times the mean, where a 1% chance of a change alone allows 72 syncs a
    // max age; the budget that frees shortens everyone's longest interval.
    expect(base.maxAgeDays / intervalDays(0.72 / base.maxAgeDays, p)).toBeCloseTo(30, 6);
    expect(t.coverageDays).toBeLessThan(base.maxAgeDays);
    // A wallet changing 10 times a max age is no quiet class: it may go five times as often.
    expect(intervalDays(10 / base.maxAgeDays, p)).toBeCloseTo(t.minIntervalDays / 5, 12);
    // The oracle, which knows every rate, is held to neither floor.
    expect(solveThreshold(groupRates(rates), budget, { ...base, minStaleChance: 0 }).minIntervalDays).toBe(0);
  });

  it('round robin: everyone at the interval the budget allows, whatever the rates say', () => {
    const rates = [0, 0, 0, 5, 50];
    const budget = 600;
    const t = solveThreshold(groupRates(rates), budget, base, 'round-robin');
    const p: PolicyParams = { ...base, thresholdDays: t.thresholdDays, coverageDays: t.coverageDays!, prior };
    for (const r of rates) expect(intervalDays(r, p)).toBeCloseTo(rates.length / budget, 9);
  });
});

describe('a subscriber it knows little about', () => {
  it('is estimated at the population’s rate, not at the rate stored under an older plan', () => {
    const now = 10 * MS_PER_DAY;
    const copies = [{ ratePerDay: 1 / 7, lastSuccessAt: now - MS_PER_DAY / 24, observed: false }];
    const e = staleEstimate(copies, now, { ratePerDay: 12 });
    expect(e.share).toBeCloseTo(staleProbability(12, 1 / 24), 9);
    expect(e.syncedOnce).toBe(1);
  });

  it('is pulled in by the first plan, and by one whose population rate asks a fifth sooner; not by the same plan again', () => {
    const plan = (ratePerDay: number): PolicyParams => ({
      ...base,
      thresholdDays: 1e-4,
      prior: { ratePerDay, weight: 0.05 },
    });
    const first = pullIn(undefined, plan(12));
    expect(first.seenOnceDays).toBeCloseTo(intervalDays(12, plan(12)), 9);
    expect(first.longestDays).toBeCloseTo(base.maxAgeDays * 0.9, 9);
    expect(pullIn(plan(12), plan(12)).seenOnceDays).toBeNull();
    expect(pullIn(plan(1), plan(12)).seenOnceDays).not.toBeNull();
  });

  it('a plan that goes round in turn because its own syncs found nearly everything changed puts everyone in turn; not on the audit alone, nor a plan on the rates', () => {
    const rates: PolicyParams = { ...base, thresholdDays: 1e-4, prior: { ratePerDay: 12, weight: 0.05 } };
    const round: PolicyParams = { ...rates, thresholdDays: Number.POSITIVE_INFINITY, coverageDays: 0.01 };
    const missed = { roundRobin: true, syncsMissed: true };
    expect(pullIn(rates, round, missed).inTurnDays).toBeCloseTo(0.01, 12);
    // Again at the next such plan: a pass cut short is finished (one in turn already moves nothing).
    expect(pullIn(round, round, missed).inTurnDays).toBeCloseTo(0.01, 12);
    expect(pullIn(rates, round, { ...missed, syncsMissed: false }).inTurnDays).toBeNull();
    expect(pullIn(round, rates, { roundRobin: false, syncsMissed: true }).inTurnDays).toBeNull();
    expect(pullIn(rates, rates).inTurnDays).toBeNull();
  });
});

describe('the budget left over once everyone due is handed out', () => {
  it('goes to those furthest through their intervals, not to the one synced a moment ago with the shortest', () => {
    const now = 1_000_000;
    const rows = [
      // Synced a second ago, due again in 15 s: first by due time, 6% through its interval.
      { id: 1, lastSuccessAt: now - 1000, dueAt: now + 15_000 },
      // Synced once 20 s ago, due in 76 s: 21% through.
      { id: 2, lastSuccessAt: now - 20_000, dueAt: now + 76_000 },
      // Synced an hour ago, due in a minute: 98% through.
      { id: 3, lastSuccessAt: now - 3_600_000, dueAt: now + 60_000 },
      { id: 4, lastSuccessAt: null, dueAt: now + 120_000 },
    ];
    expect(chooseAhead(rows, 3, now)).toEqual([4, 3, 2]);
    expect(chooseAhead(rows, 0, now)).toEqual([]);
  });
});
