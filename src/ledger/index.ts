// The ledger's upkeep (`sync_runs`' daily partitions), which every worker runs.

export { startLedgerMaintenance } from './maintenance.js';
