import { sql } from 'drizzle-orm';
import type { Tx } from '../client.js';

/**
 * Holds the per-subscriber advisory lock until the transaction ends, so that two syncs of one
 * subscriber never interleave. The key is a 64-bit hash: a collision only serialises two
 * unrelated subscribers, it never merges their data.
 */
export async function lockSubscriber(tx: Tx, key: number | string): Promise<void> {
  await tx.execute(sql`select pg_advisory_xact_lock(hashtextextended(${`cards-sync:subscriber:${key}`}, 0))`);
}
