import type pg from 'pg';
import { CHANGES_CHANNEL } from './outbox-sql.js';

// Listening for the outbox's notifications (src/events/signal.ts holds the connection): the
// outbox statement NOTIFYs CHANGES_CHANNEL in the writer's transaction, delivered at its commit.

/** LISTEN on CHANGES_CHANNEL on `client`. */
export async function listenForChanges(client: Pick<pg.ClientBase, 'query'>): Promise<void> {
  await client.query(`listen ${CHANGES_CHANNEL}`);
}

/** UNLISTEN CHANGES_CHANNEL on `client`, before it goes back to the pool. */
export async function unlistenChanges(client: Pick<pg.ClientBase, 'query'>): Promise<void> {
  await client.query(`unlisten ${CHANGES_CHANNEL}`);
}
