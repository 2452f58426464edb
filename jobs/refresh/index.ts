// The refresh's front file: what the commands, the admin app and the tests use of it. The modules
// behind it import each other directly, never through this file, so it closes no import circle.

export { refreshBacklog } from './backlog.js';
export type { RefreshOptions } from './fanout.js';
export * from './queue.js';
export { startRefreshWorker } from './worker.js';
