import type pg from 'pg';
import type { Logger } from 'pino';
import {
  addLedgerPartitions,
  compactClosedDays,
  type DroppedPartition,
  dropExpiredPartitions,
  dropStaleConversionCheck,
  ledgerIsPartitioned,
  rehomeDefaultRows,
} from '../../db/ledger/index.js';
import { startUpkeep, type Upkeep } from './loop.js';

/** Days of partitions kept ready ahead of the clock. */
const AHEAD_DAYS = 7;
/** How often a worker runs the maintenance. */
const MAINTENANCE_EVERY_MS = 60 * 60 * 1000;

export interface LedgerMaintenance {
  /** Partitions created for the days ahead (or for rows the default partition caught). */
  created: string[];
  /** Rows moved out of the default partition into partitions of their days. */
  rehomed: number;
  /** Partitions dropped by the retention. */
  dropped: DroppedPartition[];
  /** Days that ended, their indexes compacted. */
  compacted: string[];
}

/**
 * One pass of the ledger's upkeep: stray rows into their days, the days ahead created, the days
 * past `SYNC_RUNS_RETENTION_DAYS` dropped whole. Safe to run from every worker at once: a step
 * another worker's upkeep is doing is left to it, without a word (db/day-partitions.ts).
 */
export async function maintainLedger(
  pool: pg.Pool,
  o: { retentionDays: number; aheadDays?: number; onRetry?: (partition: string) => void },
): Promise<LedgerMaintenance> {
  if (!(await ledgerIsPartitioned(pool))) {
    // Before migration 0019: only what a killed migrate may have left behind.
    await dropStaleConversionCheck(pool);
    return { created: [], rehomed: 0, dropped: [], compacted: [] };
  }
  const rehomed = await rehomeDefaultRows(pool);
  const created = await addLedgerPartitions(pool, { aheadDays: o.aheadDays ?? AHEAD_DAYS });
  const dropped = await dropExpiredPartitions(pool, o.retentionDays, o.onRetry ? { onRetry: o.onRetry } : {});
  const compacted = await compactClosedDays(pool);
  return { created, rehomed, dropped, compacted };
}

/** Runs the upkeep now and every `everyMs` while the worker runs; a failed pass is logged and retried at the next. */
export function startLedgerMaintenance(
  pool: pg.Pool,
  logger: Logger,
  o: {
    retentionDays: number;
    everyMs?: number;
    /** Called with what each pass did (none by default). */
    onPass?: (r: LedgerMaintenance) => void;
  },
): Upkeep {
  const log = logger.child({ component: 'ledger' });
  return startUpkeep(
    async () => {
      const r = await maintainLedger(pool, {
        retentionDays: o.retentionDays,
        onRetry: (partition) =>
          log.debug({ partition }, 'sync_runs busy: detaching the partition again shortly'),
      });
      o.onPass?.(r);
      if (r.rehomed > 0)
        log.warn({ rows: r.rehomed }, 'sync_runs rows outside every day partition moved into their days');
      if (r.created.length > 0) log.debug({ partitions: r.created }, 'sync_runs partitions created ahead');
      if (r.compacted.length > 0)
        log.debug({ partitions: r.compacted }, 'sync_runs days closed: indexes compacted');
      if (r.dropped.length > 0) {
        log.info(
          {
            partitions: r.dropped.map((d) => d.name),
            rows: r.dropped.reduce((n, d) => n + d.estimatedRows, 0),
            bytes: r.dropped.reduce((n, d) => n + d.bytes, 0),
            retentionDays: o.retentionDays,
          },
          'old sync_runs dropped',
        );
      }
    },
    {
      everyMs: o.everyMs ?? MAINTENANCE_EVERY_MS,
      onError: (error) =>
        log.warn({ err: (error as Error).message }, 'sync_runs upkeep failed; trying again at the next pass'),
    },
  );
}
