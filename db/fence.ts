import { knownMigration } from './journal.js';

// The writer fence (migration 0029, docs/upgrading.md "The writer fence"): the tables a sync
// writes refuse a session that has not declared the newest breaking migration it knows. Every
// connection of this release declares its own newest migration, once, when it connects.

/** The session setting the fence reads. */
export const FENCE_SETTING = 'cards_sync.known_migration';

let own: string | undefined;

/**
 * The statement that declares a release's knowledge to the fence (this release's own by default):
 * send it once per session, before the session writes. A tag names a file of db/migrations
 * (digits, letters, underscores), checked here so that it needs no quoting beyond its quotes.
 */
export function declareKnownMigration(known?: string): string {
  own ??= knownMigration();
  const tag = known ?? own;
  if (!/^\w+$/.test(tag)) throw new Error(`not a migration tag: ${JSON.stringify(tag)}`);
  return `set ${FENCE_SETTING} = '${tag}'`;
}
