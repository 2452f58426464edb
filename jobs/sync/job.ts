import { z } from 'zod';
import { SYNC_TRIGGERS } from '../../db/schema/index.js';

// A sync job: its queue's name, its payload and result, and the payload's version; their own module
// so the lanes and the queue that uses them need not import each other.

/** The sync queue's name: BullMQ's keys and this project's own beside them start with it. */
export const QUEUE_NAME = 'saved-cards-sync';

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

// Job payloads carry the version of the release that wrote them (`v`). During a rolling upgrade a
// newer release may write payloads an older worker cannot read right: the older worker hands such
// a job back (delayed, no attempt used, no request spent) for a newer worker to take. A payload
// without `v` comes from a release before versions and is read as it always was.

/** How long a handed-back job waits before a worker looks at it again. */
export const NEWER_PAYLOAD_HOLD_MS = 15_000;

/** The payload's version when it is newer than `known`; undefined otherwise. */
export function newerPayload(data: unknown, known: number): number | undefined {
  if (typeof data !== 'object' || data === null) return undefined;
  const v = (data as { v?: unknown }).v;
  return typeof v === 'number' && Number.isInteger(v) && v > known ? v : undefined;
}
