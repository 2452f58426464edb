import { eq, sql } from 'drizzle-orm';
import type { Executor } from '../client.js';
import { subscribers } from '../schema/index.js';

/** The subscriber an e-mail was last seen with, if any (case-insensitive). */
export async function findSubscriberIdByEmail(db: Executor, email: string): Promise<number | undefined> {
  const [row] = await db
    .select({ id: subscribers.subscriberId })
    .from(subscribers)
    .where(sql`lower(${subscribers.email}) = lower(${email})`)
    .limit(1);
  return row?.id;
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
