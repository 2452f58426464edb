// The sandbox API (`cards-sync mock-api`, the demo, the benchmarks): the server and the options
// that shape its wallets.

export { type ChangeClass, parseChanges, parseWakeUp, type WakeUp } from './changes.js';
export { type CreatedDates, parseCreatedDates } from './created-dates.js';
export { createMockApi, type MockFaults, parseFaults } from './server.js';
export { type ChangeKinds, parseChangeKinds, parseWalletCards } from './wallets.js';
