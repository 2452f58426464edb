import type pg from 'pg';
import type { Logger } from 'pino';
import { addEventPartitions, dropExpiredEvents, eventsTableExists } from '../../db/events/index.js';
import { startUpkeep, type Upkeep } from './loop.js';

/** Days of event partitions kept ready ahead of the clock. */
const AHEAD_DAYS = 7;
/** How often a worker runs the upkeep. */
const MAINTENANCE_EVERY_MS = 60 * 60 * 1000;

export interface EventsMaintenance {
  created: string[];
  dropped: string[];
  strays: number;
}

/**
 * One pass of the change events' upkeep: the days ahead created, the days past
 * `CHANGE_EVENTS_RETENTION_DAYS` dropped whole. Safe to run from every worker at once.
 */
export async function maintainChangeEvents(
  pool: pg.Pool,
  o: { retentionDays: number; aheadDays?: number },
): Promise<EventsMaintenance> {
  if (!(await eventsTableExists(pool))) return { created: [], dropped: [], strays: 0 };
  const created = await addEventPartitions(pool, o.aheadDays ?? AHEAD_DAYS);
  const { partitions, strays } = await dropExpiredEvents(pool, o.retentionDays);
  return { created, dropped: partitions, strays };
}

/** Runs the upkeep now and every `everyMs`; a failed pass is logged and tried again at the next. */
export function startChangeEventsMaintenance(
  pool: pg.Pool,
  logger: Logger,
  o: { retentionDays: number; everyMs?: number },
): Upkeep {
  const log = logger.child({ component: 'change-events' });
  return startUpkeep(
    async () => {
      const r = await maintainChangeEvents(pool, { retentionDays: o.retentionDays });
      if (r.created.length > 0)
        log.debug({ partitions: r.created }, 'change_events partitions created ahead');
      if (r.dropped.length > 0 || r.strays > 0) {
        log.info(
          { partitions: r.dropped, strays: r.strays, retentionDays: o.retentionDays },
          'old change events dropped',
        );
      }
    },
    {
      everyMs: o.everyMs ?? MAINTENANCE_EVERY_MS,
      onError: (error) =>
        log.warn(
          { err: (error as Error).message },
          'change_events upkeep failed; trying again at the next pass',
        ),
    },
  );
}
