// The sync queue (BullMQ): enqueueing into its lanes, the worker, pausing with a reason, holds,
// the bulk lane's breaker and the API key's verdicts (how a pause is told to people is src/status/'s).
// The refresh (jobs/refresh/) enqueues into it and reads the tally its processor keeps.

export { type KeyRejection, readKeyVerdicts, standingRejections } from './api-key-verdicts.js';
export { bulkPauseKey, heldCount, readBulkPause, resumeBulkLane } from './bulk-breaker.js';
export { type HoldCause, readHoldCause } from './hold.js';
export { requestSyncs } from './intake.js';
export type { SyncJobData, SyncJobResult } from './job.js';
export { NEWER_PAYLOAD_HOLD_MS, newerPayload, QUEUE_NAME } from './job.js';
export { type LaneWait, laneWaitsLine, readLaneHeads } from './lane-heads.js';
export { BULK_THRESHOLD, createFairShare, LANE_PRIORITY, type Lane } from './lanes.js';
export {
  describeRejectedKey,
  type PauseReason,
  pauseQueue,
  readPauseReason,
  restatePauseReason,
  resumeQueue,
} from './pause-record.js';
export { createSyncQueue, type EnqueueCounts, enqueueSyncs } from './queue.js';
export { readTally } from './refresh-tally.js';
export { queueIsIdle, type SyncWorker, startSyncWorker } from './worker.js';
