import { createDb } from '../../db/client.js';
import { rootCause } from '../../db/errors.js';
import { BreakingMigrationRefused, runMigrations } from '../../db/migrate.js';
import { pingPool } from '../../db/server.js';
import { createApiClient, type Target } from '../api/index.js';
import { type Config, requireApi, requireCardTokens } from '../config/index.js';
import { createLogger } from '../logging/index.js';
import { CliError, packageVersion } from '../shared/index.js';
import { type SyncResult, syncSubscriber } from '../sync/index.js';
import { auditCli } from './audit.js';
import type { Io } from './common.js';
import { describeDbError } from './db-problem.js';
import { refuseWhenBehind } from './release-check.js';

export async function cmdMigrate(
  config: Config,
  io: Io,
  /** `folder`: the migrations folder, for tests (the CLI always uses the release's own). */
  opts: { waitMs?: number; force?: boolean; folder?: string } = {},
): Promise<number> {
  try {
    let said = 0;
    const { createdDatabase, applied, forced } = await runMigrations(config.databaseUrl, {
      ...(opts.waitMs !== undefined ? { waitMs: opts.waitMs } : {}),
      force: opts.force ?? false,
      release: packageVersion(),
      ...(opts.folder !== undefined ? { folder: opts.folder } : {}),
      onWait: (processes, migration) => {
        // Once, then every half minute: who is still in the way.
        if (Date.now() - said < 30_000) return;
        said = Date.now();
        io.err(
          `cards-sync: waiting for ${processes.length} live process${processes.length === 1 ? '' : 'es'} ` +
            `that do not know breaking migration ${migration}: ${processes.map((p) => p.id).join(', ')}`,
        );
      },
    });
    if (forced) {
      io.err(
        `cards-sync: applied breaking migration ${forced.migration} with --force over ${forced.processes.length} ` +
          `live process${forced.processes.length === 1 ? '' : 'es'} that do not know it: ${forced.processes.map((p) => p.id).join(', ')}`,
      );
      await auditCli(config, io, 'migrate_force', {
        migration: forced.migration,
        processes: forced.processes.map((p) => ({
          id: p.id,
          version: p.version,
          knownMigration: p.knownMigration,
        })),
      });
    }
    const what =
      applied === 0 ? 'migrations are up to date' : `applied ${applied} migration${applied === 1 ? '' : 's'}`;
    io.out(createdDatabase ? `created the database; ${what}` : what);
    return 0;
  } catch (error) {
    if (error instanceof BreakingMigrationRefused) throw new CliError(error.message, 1);
    throw new CliError(
      describeDbError(error, config.databaseUrl) ?? `migrate failed: ${rootCause(error).message}`,
      1,
    );
  }
}

export function formatResult(result: SyncResult, target: Target): string {
  const who =
    result.subscriberId !== null ? `subscriber ${result.subscriberId}` : 'subscriber (unknown e-mail)';
  const run = `sync run ${result.syncRunId}, ${result.durationMs} ms`;
  if (result.status === 'succeeded') {
    const c = result.counts;
    return (
      `succeeded  ${who}: ${c.cardsSeen} ${c.cardsSeen === 1 ? 'card' : 'cards'} seen; inserted ${c.inserted}, updated ${c.updated}, ` +
      `unchanged ${c.unchanged}, removed ${c.removed}, restored ${c.restored}  (${run})`
    );
  }
  const hint =
    result.status === 'auth_rejected'
      ? '; fix CARDS_API_KEY (or CARDS_API_KEY_FILE) and try again'
      : result.retryable
        ? '; transient, worth retrying'
        : '';
  void target;
  return `${result.status}  ${who}: ${result.errorMessage ?? result.errorCode}${hint}  (${run})`;
}

export async function cmdSync(
  config: Config,
  io: Io,
  target: Target,
  options: { json?: boolean },
): Promise<number> {
  const apiConfig = requireApi(config);
  const tokens = requireCardTokens(config.tokens);
  // Like the worker at start: a release older than the database's newest breaking migration
  // writes nothing and exits 3 (not a sync failure's 1), before a request is spent.
  await refuseWhenBehind(config, 'sync');
  const logger = createLogger({ level: config.logLevel });
  const api = createApiClient(apiConfig, { connections: 1 });
  const handle = createDb(config.databaseUrl, { max: 2, timeoutMs: config.databaseTimeoutMs });
  try {
    // Postgres first: a sync that cannot be written must not spend a request of a rate-limited API.
    await pingPool(handle.pool);
    const deps = {
      db: handle.db,
      api,
      logger,
      tokens,
      goneAfterNotFound: config.syncGoneAfterNotFound,
      changeEvents: config.changeEvents === 'on',
    };
    const result = await syncSubscriber(deps, { target, trigger: 'cli' });
    io.out(options.json ? JSON.stringify(result) : formatResult(result, target));
    return result.status === 'succeeded' || result.status === 'superseded' ? 0 : 1;
  } catch (error) {
    throw new CliError(
      describeDbError(error, config.databaseUrl) ?? `sync failed: ${rootCause(error).message}`,
      1,
    );
  } finally {
    await Promise.all([api.close(), handle.close()]);
  }
}
