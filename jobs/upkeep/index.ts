// The upkeep every worker runs beside its queues: the ledger's daily partitions (`sync_runs`) and the
// change events' (`change_events`), each a loop that runs once at start and then on a cadence,
// logging a failure and trying again at the next turn.

export { startChangeEventsMaintenance } from './events.js';
export { startLedgerMaintenance } from './ledger.js';
