import { z } from 'zod';
import { SYNC_TRIGGERS } from '../../db/schema/index.js';

// A sync job's payload and result: their own module so the lanes and the queue that uses them
// need not import each other.

/** The job payload: whom to sync and why. Never a secret. */
export const syncJobSchema = z.object({
  v: z.number().int().positive().optional(),
  target: z.union([
    z.object({ subscriberId: z.number().int().positive().refine(Number.isSafeInteger) }).strict(),
    z.object({ email: z.string().min(3).max(254) }).strict(),
  ]),
  trigger: z.enum(SYNC_TRIGGERS),
  refreshRunId: z.number().int().positive().optional(),
  /** A refresh's job that a person's request moved into their lane (jobs/sync/lanes.ts). */
  promoted: z.literal(true).optional(),
});
export type SyncJobData = z.infer<typeof syncJobSchema>;

/** What a finished job keeps in Redis: small on purpose. */
export interface SyncJobResult {
  status: string;
  subscriberId: number | null;
  syncRunId: number;
  cardsSeen: number;
  inserted: number;
  updated: number;
  removed: number;
  restored: number;
}
