// The freshness policy: pure code, no queue and no clock of its own. The workers, the scheduler
// (jobs/refresh/continuous.ts) and the simulator (bench/freshness.ts) all run it.
export * from './budget.js';
export * from './change-point.js';
export * from './estimate.js';
export * from './evidence.js';
export * from './mixture.js';
export * from './observation.js';
export * from './schedule.js';
export * from './staleness.js';
export * from './threshold.js';
