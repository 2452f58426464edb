import type pg from 'pg';
import { rootCause } from '../../db/errors.js';
import {
  defaultPartitionRows,
  type LedgerPartition,
  ledgerIsPartitioned,
  ledgerPartitions,
} from '../../db/ledger/index.js';

// `cards-sync doctor`'s ledger check: days ready ahead of the clock, nothing stranded in
// the default partition, and no day kept past the retention. Each is the workers' hourly upkeep
// (jobs/upkeep/ledger.ts) not running, which costs nothing at once: a warning, not a failure.

export interface LedgerCheck {
  verdict: 'ok' | 'WARN';
  name: 'ledger';
  says: string;
}

const DAY = 86_400_000;

/** The verdict on the ledger's partitions, at `now` (the database's clock). */
export function judgeLedger(
  parts: readonly LedgerPartition[],
  o: { now: Date; retentionDays: number; defaultRows: number },
): LedgerCheck {
  const days = parts.filter((p) => !p.isDefault && p.from !== null && p.to !== null);
  const legacy = parts.find((p) => !p.isDefault && p.from === null);
  const newest = Math.max(...parts.map((p) => p.to?.getTime() ?? 0));
  const ahead = Math.floor((newest - o.now.getTime()) / DAY);
  const expired = parts.filter(
    (p) => p.to !== null && p.to.getTime() <= o.now.getTime() - (o.retentionDays + 1) * DAY,
  );
  const problems = [
    ahead < 2 ? `only ${Math.max(0, ahead)} day(s) of partitions ahead` : '',
    o.defaultRows > 0 ? `${o.defaultRows} run(s) in sync_runs_default (written under a clock far off)` : '',
    expired.length > 0
      ? `${expired.length} partition(s) past SYNC_RUNS_RETENTION_DAYS=${o.retentionDays} still kept`
      : '',
  ].filter(Boolean);
  const oldest = days[0]?.from?.toISOString().slice(0, 10);
  const summary =
    `${days.length} day partitions${legacy ? ' and sync_runs_legacy (the ledger before 0019)' : ''}` +
    `${oldest ? ` from ${oldest}` : ''}, ${Math.max(0, ahead)} days ahead`;
  if (problems.length > 0) {
    return {
      verdict: 'WARN',
      name: 'ledger',
      says: `${summary}; ${problems.join('; ')}: a running worker's hourly upkeep sees to it`,
    };
  }
  return { verdict: 'ok', name: 'ledger', says: `${summary}, nothing in the default partition` };
}

/** Reads the partitions and judges them. */
export async function ledgerCheck(client: pg.ClientBase, retentionDays: number): Promise<LedgerCheck> {
  try {
    if (!(await ledgerIsPartitioned(client))) {
      return {
        verdict: 'WARN',
        name: 'ledger',
        says: 'sync_runs is not partitioned yet: run `cards-sync migrate`',
      };
    }
    const parts = await ledgerPartitions(client);
    const stray = await defaultPartitionRows(client);
    return judgeLedger(parts, { now: stray.now, retentionDays, defaultRows: stray.n });
  } catch (error) {
    return {
      verdict: 'WARN',
      name: 'ledger',
      says: `cannot read the ledger's partitions: ${rootCause(error).message}`,
    };
  }
}
