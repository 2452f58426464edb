// The ledger's statements (`sync_runs`): its daily partitions, their upkeep and retention, and
// converting a ledger that is still one plain table.

export {
  afterMigrations,
  dropStaleConversionCheck,
  prepareLedgerConversion,
  undoLedgerPreparation,
} from './convert.js';
export {
  addLedgerPartitions,
  compactClosedDays,
  type DroppedPartition,
  defaultPartitionRows,
  dropExpiredPartitions,
  type LedgerPartition,
  ledgerIsPartitioned,
  ledgerPartitions,
  rehomeDefaultRows,
} from './partitions.js';
