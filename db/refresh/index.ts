// The refresh's statements: runs, the continuous refresh's schedule and lease, the stored plan,
// the evidence the plan is fitted to, and how fresh the copy is.

export { fillStaleRates, planEvidenceSample, withoutStaleRate } from './evidence.js';
export {
  auditDisagrees,
  auditDraws,
  auditSince,
  type Freshness,
  plansSyncsSince,
  readFreshness,
} from './freshness.js';
export {
  LEASE_APPLICATION_NAME,
  type LeaseHolder,
  leaseHolderSession,
} from './lease.js';
export { createLease, type Lease } from './lease-session.js';
export { policyCache, readPolicy, type StoredPolicy, savePolicy } from './policy.js';
export {
  abandonRefreshRun,
  applyTally,
  closeRefreshRun,
  countRefreshable,
  haltRefreshRun,
  inProgressRun,
  lastRefreshRun,
  loadRefreshRun,
  markFanoutFinished,
  type RefreshRun,
  type RefreshTally,
  recordFanoutPage,
  resumeHaltedRun,
  type SweepCursor,
  savePlan,
  setRefreshJobId,
  startRefreshRun,
  subscriberPage,
} from './runs.js';
export { claimDue, countDue, randomSubscribers } from './schedule.js';
export { capDueTimes, capHolds, dueInTurn, pullInSeenOnce } from './schedule-cap.js';
