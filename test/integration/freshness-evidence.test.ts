import { sql } from 'drizzle-orm';
import { afterEach, describe, expect, it } from 'vitest';
import { replan } from '../../jobs/refresh/policy.js';
import type { SavedCard } from '../../src/api/index.js';
import {
  afterSuccess,
  changePointMeanRate,
  defaultPolicy,
  estimateRate,
  evidenceGroup,
  evidenceOf,
  fitGroupedMixture,
  MS_PER_DAY,
  type PolicyParams,
  posteriorMeanRate,
  posteriorRateDraw,
} from '../../src/freshness/index.js';
import { istanbulDate } from '../../src/mock-api/created-dates.js';
import { applyCardsBatch } from '../../src/sync/apply-cards.js';
import { makeCard, testTokens } from '../support/fixtures.js';
import { useTestDatabase } from '../support/helpers.js';

// evidence from the first answer (the cards' createDates) in the population's prior,
// and forgetting, so a wallet that changes its habits is re-learned.

const NOW = Date.UTC(2026, 10, 25);
const young = { newestCardAgeDays: 0.5, cards: 3 };
const old = { newestCardAgeDays: 900, cards: 1 };

describe('evidence from the first answer', () => {
  it("reads the newest card's age and puts it in a group on a log scale", () => {
    const e = evidenceOf(
      [{ createDate: istanbulDate(NOW - 2 * MS_PER_DAY) }, { createDate: '2019-01-01T00:00:00+03:00' }],
      NOW,
    );
    expect(e.cards).toBe(2);
    expect(e.newestCardAgeDays).toBeCloseTo(2, 4);
    expect(evidenceGroup(e)).toBe('age0');
    expect(evidenceGroup(old)).toBe('age5');
    expect(evidenceGroup({ newestCardAgeDays: null, cards: 0 })).toBe('none');
    expect(evidenceGroup(null)).toBeNull();
  });

  it('where young cards go with busy wallets, a subscriber never watched starts busy; where they do not, the evidence changes nothing', () => {
    const busy = [-1, -1, -1];
    const quiet = [7, 7];
    // The latest answer's age: the first answer's, and the days watched since.
    const at = (first: { newestCardAgeDays: number; cards: number }, observations: number[]) => ({
      ...first,
      newestCardAgeDays: first.newestCardAgeDays + observations.reduce((a, o) => a + Math.abs(o), 0),
    });
    // The createDate world: 60 busy wallets with young cards, 140 quiet ones with old cards.
    const linked = fitGroupedMixture(
      Array.from({ length: 200 }, (_, i) =>
        i < 60
          ? { observations: busy, evidence: at(young, busy) }
          : { observations: quiet, evidence: at(old, quiet) },
      ),
      0.1,
    )!;
    const prior = { ratePerDay: 0.1, weight: 0.05, mixture: linked };
    // The posterior mean carries the shrinkage's share of the busy tail: compared, not absolute.
    expect(estimateRate(null, prior, young)).toBeGreaterThan(3 * estimateRate(null, prior, old));
    // Without the evidence, the estimate is everyone's.
    expect(estimateRate(null, prior)).toBeCloseTo(
      estimateRate(null, prior, { newestCardAgeDays: 1e6, cards: 1 }),
      6,
    );
    // The control: the same wallets, dates unrelated to change (every other one young).
    const unrelated = fitGroupedMixture(
      Array.from({ length: 200 }, (_, i) => {
        const observations = i % 10 < 3 ? busy : quiet;
        return { observations, evidence: at(Math.floor(i / 10) % 2 === 0 ? young : old, observations) };
      }),
      0.1,
    )!;
    const control = { ratePerDay: 0.1, weight: 0.05, mixture: unrelated };
    const a = estimateRate(null, control, young);
    const b = estimateRate(null, control, old);
    expect(Math.abs(a - b) / Math.max(a, b)).toBeLessThan(0.15);
  });

  it('a card added while the refresh watched is a change already observed, not evidence', () => {
    // The old-cards world: every wallet held cards years old at its first answer; the busy ones
    // have since added one, which their latest answer dates within the days watched.
    const busy = [-1, -1, -1];
    const quiet = [1, 1, 1];
    const samples = Array.from({ length: 200 }, (_, i) =>
      i < 60
        ? { observations: busy, evidence: { newestCardAgeDays: 0.5, cards: 3 } }
        : { observations: quiet, evidence: { newestCardAgeDays: 900 + 3, cards: 2 } },
    );
    const prior = { ratePerDay: 0.3, weight: 0.05, mixture: fitGroupedMixture(samples, 0.3)! };
    // The card seen arriving puts the busy wallet in no group: everyone's mixture.
    expect(evidenceGroup(samples[0]!.evidence, busy)).toBeNull();
    expect(evidenceGroup(samples[0]!.evidence)).toBe('age-1');
    expect(estimateRate(busy, prior, samples[0]!.evidence)).toBeCloseTo(estimateRate(busy, prior), 6);
    // The old cards' group holds the quiet wallets only because the busy ones left it: its fit
    // would read them quieter than they are. It is everyone's, within a few percent.
    const quietOld = estimateRate(quiet, prior, samples[100]!.evidence);
    const quietNone = estimateRate(quiet, prior);
    expect(Math.abs(quietOld - quietNone) / quietNone).toBeLessThan(0.05);
    // So is a wallet with old cards never watched.
    const fresh = estimateRate(null, prior, { newestCardAgeDays: 900, cards: 2 });
    expect(Math.abs(fresh - estimateRate(null, prior)) / estimateRate(null, prior)).toBeLessThan(0.05);
  });

  it('forgets: a wallet quiet for months that changed each of the last three days is read as busy', () => {
    const mixture = { ratesPerDay: [0.001, 0.01, 0.1, 1, 10], weights: [0.7, 0.1, 0.1, 0.05, 0.05] };
    const history = [60, 60, -1, -1, -1];
    const remembered = posteriorMeanRate(history, mixture);
    const forgetting = posteriorMeanRate(history, mixture, 7);
    expect(remembered).toBeLessThan(0.2);
    expect(forgetting).toBeGreaterThan(2 * remembered);
    expect(forgetting).toBeGreaterThan(0.3);
    // A steady history reads about the same either way.
    const steady = Array.from({ length: 20 }, () => -1);
    expect(posteriorMeanRate(steady, mixture, 7) / posteriorMeanRate(steady, mixture)).toBeGreaterThan(0.8);
  });
});

describe('a change of habit (change point)', () => {
  const mixture = { ratesPerDay: [0.001, 0.01, 0.1, 1, 10], weights: [0.7, 0.1, 0.1, 0.05, 0.05] };

  it('without a hazard, is the posterior mean', () => {
    const history = [60, 60, -1, -1];
    expect(changePointMeanRate(history, mixture, 21, 0)).toBe(posteriorMeanRate(history, mixture, 21));
  });

  it('a wallet quiet for 120 days that changed on each of the last two is read by its recent days', () => {
    const history = [60, 60, -1, -1];
    const whole = posteriorMeanRate(history, mixture);
    const broken = changePointMeanRate(history, mixture, undefined, 0.01);
    expect(whole).toBeLessThan(0.05);
    expect(broken).toBeGreaterThan(1);
    // Forgetting alone (τ = 21 days) gets a tenth of the way.
    expect(posteriorMeanRate(history, mixture, 21)).toBeLessThan(0.2);
  });

  it('a steady history reads about the same with or without it', () => {
    const steady = Array.from({ length: 20 }, (_, i) => (i % 2 ? -1 : 2));
    const ratio = changePointMeanRate(steady, mixture, undefined, 0.01) / posteriorMeanRate(steady, mixture);
    expect(ratio).toBeGreaterThan(0.9);
    expect(ratio).toBeLessThan(1.15);
  });
});

describe('exploration (Thompson sampling, the simulator only)', () => {
  const mixture = { ratesPerDay: [0.001, 0.01, 0.1, 1, 10], weights: [0.7, 0.1, 0.1, 0.05, 0.05] };

  it("draws a rate from the subscriber's posterior by the uniform it is given", () => {
    expect(posteriorRateDraw(null, mixture, 0)).toBe(0.001);
    expect(posteriorRateDraw(null, mixture, 0.85)).toBe(0.1);
    expect(posteriorRateDraw(null, mixture, 0.999)).toBe(10);
    // After 20 changed days, the quiet rates are out of the posterior.
    expect(
      posteriorRateDraw(
        Array.from({ length: 20 }, () => -1),
        mixture,
        0.01,
      ),
    ).toBeGreaterThanOrEqual(1);
  });

  it('a draw only ever asks sooner than the posterior mean plans', () => {
    const params: PolicyParams = {
      ...defaultPolicy(7),
      thresholdDays: 0.5,
      prior: { ...defaultPolicy(7).prior, mixture },
    };
    const before = { lastSuccessAt: NOW - 3 * MS_PER_DAY, observations: [20], ratePerDay: 0.01 };
    const mean = afterSuccess(before, false, NOW, params).nextRefreshAt;
    const dues = [0, 0.5, 0.8, 0.9, 0.99].map(
      (u) => afterSuccess(before, false, NOW, params, u).nextRefreshAt,
    );
    for (const due of dues) expect(due).toBeLessThanOrEqual(mean);
    expect(Math.min(...dues)).toBeLessThan(mean);
  });
});

describe('the evidence reaches the policy', () => {
  const database = useTestDatabase();
  afterEach(async () => {
    await database.handle.db.execute(
      sql`truncate sync_runs, subscribers, saved_cards, refresh_policy cascade`,
    );
  });

  it("a first sync's answer puts its subscriber in its evidence group: young cards start busy, old ones quiet", async () => {
    // A plan whose prior says: wallets with a card saved within a day change 10 times a day; of the
    // rest, 9 in 10 never and 1 in 10 as often.
    const grid = [0.001, 0.1, 10];
    const params: PolicyParams = {
      ...defaultPolicy(7),
      prior: {
        ratePerDay: 0.1,
        weight: 0.05,
        forgetDays: 21,
        mixture: {
          ratesPerDay: grid,
          weights: [0.9, 0, 0.1],
          groups: { 'age-3': [0, 0, 1] },
        },
      },
    };
    const now = Date.now();
    const answer = (subscriberId: number, cards: SavedCard[]) => ({
      subscriberId,
      cards,
      run: {
        email: null,
        trigger: 'manual' as const,
        jobId: null,
        refreshRunId: null,
        startedAt: new Date(),
      },
    });
    const young = [makeCard(36001, { createDate: istanbulDate(now - 3_600_000) })];
    const old = [makeCard(36002, { createDate: '2019-03-01T10:00:00+03:00' })];
    await applyCardsBatch(database.handle.db, testTokens, [answer(36001, young), answer(36002, old)], {
      policy: () => params,
    });
    const { rows } = await database.handle.pool.query<{
      subscriber_id: number;
      change_rate_per_day: number;
      stale_rate_per_day: number;
    }>(
      'select subscriber_id::int, change_rate_per_day, stale_rate_per_day from subscribers order by subscriber_id',
    );
    expect(rows[0]!.change_rate_per_day).toBeCloseTo(10, 3);
    expect(rows[1]!.change_rate_per_day).toBeCloseTo(0.9 * 0.001 + 0.1 * 10, 4);
    // And the rate it was planned by, which the estimate reads: the young group's posterior is one
    // rate, the same; the old one's mean is the 1 in 10 that change ten times a day, while its copy
    // is far less likely stale over its interval than that mean says.
    expect(rows[0]!.stale_rate_per_day / 10).toBeCloseTo(1, 3);
    const first = { lastSuccessAt: null, observations: null, ratePerDay: null };
    const planned = afterSuccess({ ...first, evidence: evidenceOf(old, now) }, false, now, params);
    expect(rows[1]!.stale_rate_per_day).toBeCloseTo(planned.staleRatePerDay!, 6);
    expect(rows[1]!.stale_rate_per_day).toBeLessThan(rows[1]!.change_rate_per_day / 10);
  });

  it('the plan fits a prior per evidence group from saved_cards.create_date', async () => {
    // 60 busy subscribers whose newest card is hours old, older than the 43 minutes they were
    // watched (so their first answer had it), 60 quiet ones with years-old cards.
    await database.handle.pool.query(
      `insert into subscribers (subscriber_id, last_success_at, active_cards, change_observations)
        select g, now(), 1, case when g <= 60 then array[-0.01, -0.01, -0.01]::real[] else array[7, 7]::real[] end
        from generate_series(1, 120) g`,
    );
    await database.handle.pool.query(
      `insert into saved_cards (id, subscriber_id, card_token, bin_number, card_family, card_bank_code, card_bank_name,
          company_id, create_date, first_seen_at, last_seen_at, updated_at)
        select g * 10, g, 'tok' || g, '4761-xxxx-xxxx-0043', 'Bonus', 100100000, 'AKBA', -1,
          case when g <= 60 then now() - interval '4 hours' else timestamptz '2019-03-01' end, now(), now(), now()
        from generate_series(1, 120) g`,
    );
    const plan = await replan(database.handle.pool, {
      mode: 'continuous',
      budgetPerSec: 1,
      maxAgeMs: 7 * MS_PER_DAY,
      auditShare: 0.02,
    });
    const prior = { ratePerDay: plan.priorRatePerDay, weight: 0.05, mixture: plan.priorMixture };
    expect(estimateRate(null, prior, { newestCardAgeDays: 0.1, cards: 1 })).toBeGreaterThan(
      2 * estimateRate(null, prior, { newestCardAgeDays: 2000, cards: 1 }),
    );
  });
});
