import { and, eq, ne, sql } from 'drizzle-orm';
import type { Executor, Tx } from '../client.js';
import { subscribers } from '../schema.js';

/** The subscriber an e-mail was last seen with, if any (case-insensitive). */
export async function findSubscriberIdByEmail(db: Executor, email: string): Promise<number | undefined> {
  const [row] = await db
    .select({ id: subscribers.subscriberId })
    .from(subscribers)
    .where(sql`lower(${subscribers.email}) = lower(${email})`)
    .limit(1);
  return row?.id;
}

/** Records a successful sync; learns the e-mail when the sync was by e-mail. */
export async function recordSubscriberSuccess(
  tx: Tx,
  values: { subscriberId: number; email?: string | undefined; activeCards: number; now: Date },
): Promise<void> {
  if (values.email !== undefined) {
    // An e-mail belongs to one subscriber: if it moved, the old owner forgets it.
    await tx
      .update(subscribers)
      .set({ email: null })
      .where(
        and(
          sql`lower(${subscribers.email}) = lower(${values.email})`,
          ne(subscribers.subscriberId, values.subscriberId),
        ),
      );
  }
  const row = {
    subscriberId: values.subscriberId,
    lastSyncedAt: values.now,
    lastSuccessAt: values.now,
    lastStatus: 'succeeded',
    lastError: null,
    consecutiveFailures: 0,
    activeCards: values.activeCards,
    ...(values.email !== undefined ? { email: values.email } : {}),
  };
  const { subscriberId: _, ...update } = row;
  await tx
    .insert(subscribers)
    .values(row)
    .onConflictDoUpdate({ target: subscribers.subscriberId, set: update });
}

/** Records a failed sync on a subscriber that is already known; an unknown one is not created. */
export async function recordSubscriberFailure(
  db: Executor,
  values: { subscriberId: number; status: string; error: string | null; now: Date },
): Promise<void> {
  await db
    .update(subscribers)
    .set({
      lastSyncedAt: values.now,
      lastStatus: values.status,
      lastError: values.error,
      consecutiveFailures: sql`${subscribers.consecutiveFailures} + 1`,
    })
    .where(eq(subscribers.subscriberId, values.subscriberId));
}
