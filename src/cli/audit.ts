import { createDb, type Db } from '../../db/client.js';
import { auditAction, cliActor } from '../audit/index.js';
import type { Config } from '../config/index.js';
import type { Io } from './common.js';
import { describeDbError } from './db-problem.js';

/**
 * Writes the audit row of a CLI action already done (actor: the OS user). When the row cannot be
 * written the action stands and is reported as usual: a warning on stderr says the row is missing,
 * and the exit code stays the action's, so a script does not redo what was done.
 */
export async function auditCli(
  config: Config,
  io: Io,
  action: string,
  detail: Record<string, unknown>,
  db?: Db,
): Promise<void> {
  const entry = { actor: cliActor(io.env), source: 'cli' as const, action, detail };
  let error: Error | undefined;
  if (db !== undefined) error = await auditAction(db, entry);
  else {
    const handle = createDb(config.databaseUrl, { max: 1, timeoutMs: config.databaseTimeoutMs });
    try {
      error = await auditAction(handle.db, entry);
    } finally {
      await handle.close().catch(() => {});
    }
  }
  if (error !== undefined) {
    io.err(
      `cards-sync: warning: the ${action} was done, but its audit row (admin_actions) could not be written: ` +
        (describeDbError(error, config.databaseUrl) ?? error.message),
    );
  }
}
