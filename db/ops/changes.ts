import type { Tx } from '../client.js';
import type { ChangeKind } from '../schema.js';
import { savedCardChanges } from '../schema.js';

export interface ChangeRow {
  cardId: number;
  subscriberId: number;
  change: ChangeKind;
  changedFields: string[] | null;
}

const BATCH = 5000;

/** Appends history rows, all stamped with the sync run and one time. */
export async function insertChanges(
  tx: Tx,
  rows: readonly ChangeRow[],
  syncRunId: number,
  now: Date,
): Promise<void> {
  for (let i = 0; i < rows.length; i += BATCH) {
    await tx.insert(savedCardChanges).values(
      rows.slice(i, i + BATCH).map((r) => ({
        cardId: r.cardId,
        subscriberId: r.subscriberId,
        change: r.change,
        changedFields: r.changedFields,
        syncRunId,
        changedAt: now,
      })),
    );
  }
}
