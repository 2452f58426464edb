// The sandbox's flag parsers, for `cards-sync mock-api` and the benchmarks: importing this loads
// neither the server nor the data set's client (docs/architecture.md, "Light fronts").

export { parseChanges, parseWakeUp } from './changes.js';
export { parseCreatedDates } from './created-dates.js';
export { parseFaults } from './faults.js';
export { parseChangeKinds, parseWalletCards } from './wallets.js';
