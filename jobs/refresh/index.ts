// The refresh's front file: what the commands, the admin app and the tests use of it: the refresh
// worker (nightly and continuous), its queue, its status, and pausing and resuming all processing.
// The modules behind it import each other directly, never through this file, so it closes no
// import circle.

export { refreshBacklog } from './backlog.js';
export { replanAndPullIn } from './continuous.js';
export { pauseProcessing, resumeProcessing } from './control.js';
export { readLeaseHolder } from './lease-holder.js';
export type { RefreshOptions } from './nightly.js';
export { progressOf } from './plan.js';
export type { RefreshPlanSettings } from './policy.js';
export {
  createRefreshQueue,
  openRefreshRun,
  REFRESH_PAYLOAD_VERSION,
  REFRESH_QUEUE_NAME,
  type RefreshJobData,
  refreshIsIdle,
  registerNightlyScheduler,
  registerRefreshMode,
  SCHEDULER_ID,
} from './queue.js';
export { type QueueStatus, queueStatusOf } from './queue-status.js';
export { startRefreshWorker } from './worker.js';
