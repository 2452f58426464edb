import { createDb } from '../../db/client.js';
import { createRefreshQueue, pauseProcessing, resumeProcessing } from '../../jobs/refresh/index.js';
import { cliActor, pauseDetail, resumeAudit } from '../audit/index.js';
import type { Config } from '../config/index.js';
import { formatTime } from '../shared/index.js';
import { auditCli } from './audit.js';
import type { Io } from './common.js';
import { describeDbError } from './db-problem.js';
import { withQueue } from './status.js';

/** `cards-sync pause`: stops every worker from taking new jobs; in-flight ones finish. */
export async function cmdPause(config: Config, io: Io, opts: { reason?: string }): Promise<number> {
  const reason = opts.reason ?? 'paused by an operator';
  const outcome = await withQueue(config, (syncQueue, redis) =>
    pauseProcessing({ syncQueue, redis }, reason, cliActor(io.env)),
  );
  await auditCli(config, io, 'pause', pauseDetail(reason, outcome));
  if (!outcome.paused) {
    const a = outcome.already;
    io.out(
      `already paused${a ? ` by ${a.by} at ${formatTime(a.at)}` : ''}; the reason is now: ${outcome.now.reason}` +
        `${a ? ` (it was: ${a.reason}; kept in status and the audit)` : ''}. \`cards-sync resume\` continues`,
    );
    return 0;
  }
  io.out('paused: workers finish their current jobs and take no new ones; `cards-sync resume` continues');
  return 0;
}

/** `cards-sync resume`: resumes the queue and continues a refresh run the breaker halted. */
export async function cmdResume(config: Config, io: Io): Promise<number> {
  const handle = createDb(config.databaseUrl, { max: 1, timeoutMs: config.databaseTimeoutMs });
  try {
    const outcome = await withQueue(config, async (syncQueue, redis) => {
      const refreshQueue = createRefreshQueue(redis, config.queuePrefix);
      try {
        return await resumeProcessing({ db: handle.db, syncQueue, refreshQueue, redis });
      } catch (error) {
        // The queue may already be running again; say what could not be done.
        io.err(
          `cards-sync: could not check for a halted refresh: ${describeDbError(error, config.databaseUrl) ?? 'database error'}`,
        );
        return undefined;
      } finally {
        await refreshQueue.close().catch(() => {});
      }
    });
    if (outcome === undefined) return 1;
    const audit = resumeAudit(outcome);
    await auditCli(config, io, audit.action, audit.detail, handle.db);
    const bulk = outcome.bulkLane.wasPaused
      ? `; the bulk lane resumed, ${outcome.bulkLane.released} held jobs sent on`
      : '';
    io.out(
      outcome.continuedRefreshRunId !== undefined
        ? `resumed; refresh run ${outcome.continuedRefreshRunId} continues from where it halted${bulk}`
        : outcome.wasPaused || outcome.bulkLane.wasPaused
          ? `resumed${bulk}`
          : 'resumed (the queue was not paused)',
    );
    return 0;
  } finally {
    await handle.close();
  }
}
