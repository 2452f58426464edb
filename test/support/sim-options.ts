import type { SimOptions } from './freshness-sim/index.js';

/**
 * The population of `bench:freshness-e2e` in the simulator at a tenth of its size, minutes as days
 * (a max age of 5 min, 15 syncs a second), for the tests that run the simulator on it.
 */
export function e2eSimOptions(over: Partial<SimOptions> = {}): SimOptions {
  return {
    subscribers: 1000,
    classes: [
      { label: 'never', share: 0.7, ratePerDay: 0 },
      { label: '1/h', share: 0.2, ratePerDay: 24 },
      { label: '12/h', share: 0.08, ratePerDay: 288 },
      { label: '1/min', share: 0.02, ratePerDay: 1440 },
    ],
    budgetPerDay: 15 * 86_400,
    days: 9 / 1440,
    warmupDays: 0,
    maxAgeDays: 5 / 1440,
    auditShare: 0.02,
    seed: 7,
    tickSeconds: 1,
    replanSeconds: 60,
    snapshotSeconds: 10,
    ...over,
  };
}
