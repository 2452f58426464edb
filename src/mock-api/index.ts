// The sandbox API (`cards-sync mock-api`, the demo, the benchmarks): the server and the options
// that shape its wallets. Their flags' parsers are in parse.ts.

export type { ChangeClass, WakeUp } from './changes.js';
export type { CreatedDates } from './created-dates.js';
export type { MockFaults } from './faults.js';
export { createMockApi } from './server.js';
export type { ChangeKinds } from './wallets.js';
