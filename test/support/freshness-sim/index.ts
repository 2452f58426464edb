// The freshness simulator: the refresh in virtual time, running the product's own policy
// (src/freshness/) against simulated wallets, so that a 30-day run takes seconds. The tests run it
// (test/unit/freshness-policy.test.ts and others) and so do the freshness benchmarks
// (bench/freshness*.ts, docs/benchmarks.md), which enter it here. It lives with the tests' support
// and not in bench/, because the tests depend on it and bench/ is not built with the product
// (docs/benchmarks.md).
//
// What it offers: `simulate` (sim.ts), a run of one policy on one world, and its options and
// results (types.ts); `runAs` (plan.ts), the policy a benchmark's name stands for; the world's
// subscribers (world.ts); the named worlds of the benchmarks and their flags (worlds.ts); the
// family of worlds drawn at random (family.ts); and its seeded random numbers (rng.ts).

export {
  type Cadence,
  describeWorld,
  drawWorld,
  familyE2eFlags,
  formatMaxAge,
  SIMULATED_AT_MOST,
} from './family.js';
export { runAs } from './plan.js';
export { mulberry32 } from './rng.js';
export { simulate } from './sim.js';
export type { BenchPolicy, RateClass, SimOptions, SimResult } from './types.js';
export { createWorld, intakeIds } from './world.js';
export {
  parseIntake,
  parseRetune,
  readWallets,
  simRetune,
  WORLDS,
  type WorldFlags,
  worldFlags,
} from './worlds.js';
