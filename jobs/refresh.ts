// The refresh's front file: what the commands, the admin app and the tests use of it. The modules
// behind it import each other directly, never through this file, so it closes no import circle.

export { refreshBacklog } from './refresh-backlog.js';
export type { RefreshOptions } from './refresh-fanout.js';
export * from './refresh-queue.js';
export { startRefreshWorker } from './refresh-worker.js';
