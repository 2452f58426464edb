import { breakingAhead, tooOldMessage } from '../../db/breaking.js';
import { createDb } from '../../db/client.js';
import { rootCause } from '../../db/errors.js';
import { knownMigration } from '../../db/migrate.js';
import type { Config } from '../config/index.js';
import { CliError, packageVersion } from '../shared/index.js';
import { describeDbError } from './db-problem.js';

// The refusal a command that writes synced data (cards, their history and events, the ledger)
// makes before its first write, as the worker does at start (worker-checks.ts): a release older
// than the database's newest breaking migration would write what later readers trust wrongly.
// Commands that only put work on the queue (enqueue, refresh, the admin server's resync) need not:
// a worker of such a release does not start, so only the newer release's workers take that work.

/**
 * Throws a CliError with exit code 3 and the worker's one line when the database has a breaking
 * migration this release does not know; exit code 1 when Postgres cannot be asked.
 * @param command names the command in the message of a failure that is not a known kind (`sync`).
 * @param known the newest migration this release knows. Default: the release's own (`knownMigration()`).
 */
export async function refuseWhenBehind(
  config: Config,
  command: string,
  known = knownMigration(),
): Promise<void> {
  const check = createDb(config.databaseUrl, { max: 1, timeoutMs: config.databaseTimeoutMs });
  let ahead: string | undefined;
  try {
    ahead = await breakingAhead(check.pool, known);
  } catch (error) {
    throw new CliError(
      describeDbError(error, config.databaseUrl) ?? `${command} failed: ${rootCause(error).message}`,
      1,
    );
  } finally {
    await check.close();
  }
  if (ahead !== undefined) throw new CliError(tooOldMessage(packageVersion(), known, ahead), 3);
}
