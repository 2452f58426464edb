import { describe, expect, it } from 'vitest';
import type { PolicyParams, RateMixture } from '../../src/freshness/index.js';
import { runAs, type SimOptions, simulate } from '../support/freshness-sim/index.js';
import { e2eSimOptions } from '../support/sim-options.js';

// The class learner of test/support/freshness-sim/plan.ts: the continuous policy whose prior is the world's
// true mixture of rates (and, once quiet wallets wake, the woken rate), each wallet's class still
// learnt from its own syncs.

const MINUTE = 60_000;

/** The e2e population in the simulator, a tenth of the quiet wallets waking 12/h at minute 4. */
const options = (): SimOptions =>
  e2eSimOptions({
    days: 8 / 1440,
    createdDates: 'from-changes',
    wakeUp: { share: 0.1, ratePerDay: 288, atDays: 4 / 1440 },
  });

describe('the class learner', () => {
  it('plans on the true mixture, the woken rate from its moment on, with no evidence groups', () => {
    const seen: { at: number; mixture: RateMixture }[] = [];
    const run = runAs('class-learner', {
      ...options(),
      onTick: (now: number, params: PolicyParams) => {
        if (now % MINUTE === 0 && params.prior.mixture) seen.push({ at: now, mixture: params.prior.mixture });
      },
    });
    expect(run.policy).toBe('continuous');
    const r = simulate(run.policy, run.options);
    const before = seen.find((s) => s.at === 3 * MINUTE)!.mixture;
    expect(before.ratesPerDay).toEqual([0, 24, 288, 1440]);
    expect(before.weights).toEqual([0.7, 0.2, 0.08, 0.02]);
    expect(before.groups).toBeUndefined();
    const after = seen.find((s) => s.at === 5 * MINUTE)!.mixture;
    const woken = 0.7 - after.weights[0]!;
    expect(woken).toBeGreaterThan(0.05);
    expect(after.weights[2]).toBeCloseTo(0.08 + woken, 10);
    expect(r.syncs).toBeGreaterThan(0);
  });

  it('with evidence, each createDate group has the true mixture of its own members', () => {
    let mixture: RateMixture | null | undefined;
    const run = runAs('class-learner-evidence', {
      ...options(),
      onTick: (_now: number, params: PolicyParams) => {
        mixture = params.prior.mixture;
      },
    });
    simulate(run.policy, run.options);
    const groups = Object.values(mixture!.groups!);
    expect(groups.length).toBeGreaterThan(1);
    for (const weights of groups) expect(weights.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 10);
    // The groups differ: the newest card's age says something of the rate where createDates come from changes.
    expect(Math.max(...groups.map((w) => w[0]!)) - Math.min(...groups.map((w) => w[0]!))).toBeGreaterThan(
      0.5,
    );
  });
});
