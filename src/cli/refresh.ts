import { createDb } from '../../db/client.js';
import {
  abandonRefreshRun,
  countRefreshable,
  setRefreshJobId,
  type startRefreshRun,
} from '../../db/refresh/index.js';
import { createRedis } from '../../jobs/redis.js';
import { createRefreshQueue, openRefreshRun, REFRESH_PAYLOAD_VERSION } from '../../jobs/refresh/index.js';
import type { Config } from '../config/index.js';
import { CliError, durationHint, durationMs, formatTime } from '../shared/index.js';
import { auditCli } from './audit.js';
import { ensureRedis, type Io } from './common.js';
import { describeDbError } from './db-problem.js';

/** `36h`, `7d`, `90m`, `2w`, `1.5d` (lower-case units) → milliseconds. */
export function parseDuration(raw: string): number {
  const ms = durationMs(raw);
  if (ms === undefined)
    throw new CliError(
      `--stale takes a duration such as 36h, 1.5d, 7d or 90m (got ${JSON.stringify(raw.slice(0, 40))}): ${durationHint(raw)}`,
      2,
    );
  if (ms <= 0) throw new CliError('--stale must be longer than zero', 2);
  return ms;
}

// With REFRESH_MODE=continuous one window closes and the next opens at once: a manual run, which
// waits for no run to be in progress, would never start. Say so, and what does the job instead.
const CONTINUOUS_INSTEAD =
  'with REFRESH_MODE=continuous a refresh window is always open (each syncs whoever is due first, the next opens as it closes), ' +
  'so a manual refresh never starts beside it. For a one-off sweep, queue the subscribers with `cards-sync enqueue --file PATH` ' +
  '(the bulk lane, served before the refresh); for fresher copies all the time, raise REFRESH_BUDGET_PER_SEC or lower REFRESH_MAX_AGE; ' +
  'follow the window with `cards-sync status`';

/** `cards-sync refresh [--stale DURATION]`: opens a manual refresh run and hands it to the workers. */
export async function cmdRefresh(config: Config, io: Io, opts: { stale?: string }): Promise<number> {
  const staleMs = opts.stale !== undefined ? parseDuration(opts.stale) : undefined;
  const redis = createRedis(config.redis);
  const queue = createRefreshQueue(redis, config.queuePrefix);
  const handle = createDb(config.databaseUrl, { max: 1, timeoutMs: config.databaseTimeoutMs });
  try {
    await ensureRedis(redis, config.redis);
    const staleBefore = staleMs !== undefined ? new Date(Date.now() - staleMs) : undefined;
    let matching: number;
    try {
      matching = await countRefreshable(handle.db, staleBefore ?? null);
    } catch (error) {
      throw new CliError(describeDbError(error, config.databaseUrl) ?? 'cannot count subscribers', 1);
    }
    const asked = { ...(opts.stale !== undefined ? { stale: opts.stale } : {}), matching };
    if (matching === 0) {
      await auditCli(config, io, 'refresh', { ...asked, started: false }, handle.db);
      // Not a run: an empty one would read as a successful refresh to status and to alerts.
      io.out(
        staleBefore
          ? `nothing to refresh: every known subscriber synced successfully since ${formatTime(staleBefore)}; no run started`
          : 'nothing to refresh: no subscriber is known yet (enqueue or sync some first); no run started',
      );
      return 0;
    }
    let started: Awaited<ReturnType<typeof startRefreshRun>>;
    try {
      started = await openRefreshRun(handle.db, queue, { trigger: 'manual', staleBefore });
    } catch (error) {
      throw new CliError(describeDbError(error, config.databaseUrl) ?? 'cannot open a refresh run', 1);
    }
    if (!started.started) {
      const r = started.inProgress;
      await auditCli(config, io, 'refresh', { ...asked, started: false, inProgressRunId: r.id }, handle.db);
      io.err(
        `cards-sync: refresh run ${r.id} (${r.trigger}) is already ${r.status}, started ${formatTime(r.startedAt)}; ` +
          (r.status === 'halted'
            ? '`cards-sync resume` continues it'
            : r.trigger === 'continuous'
              ? CONTINUOUS_INSTEAD
              : 'follow it with `cards-sync status`'),
      );
      return 1;
    }
    try {
      const job = await queue.add('refresh', {
        v: REFRESH_PAYLOAD_VERSION,
        trigger: 'manual',
        refreshRunId: started.run.id,
      });
      if (job.id) await setRefreshJobId(handle.db, started.run.id, job.id);
    } catch (error) {
      await abandonRefreshRun(handle.db, started.run.id, 'its refresh job could not be queued');
      throw error;
    }
    await auditCli(
      config,
      io,
      'refresh',
      { ...asked, started: true, refreshRunId: started.run.id },
      handle.db,
    );
    io.out(
      `started refresh run ${started.run.id}${staleBefore ? ` of subscribers not synced since ${formatTime(staleBefore)}` : ' of every known subscriber'}; ` +
        'the workers fan it out — follow it with `cards-sync status`',
    );
    return 0;
  } finally {
    await queue.close().catch(() => {});
    redis.disconnect();
    await handle.close();
  }
}
