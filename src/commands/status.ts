import { createDb } from '../../db/client.js';
import { rootCause } from '../../db/errors.js';
import { lastRefreshRun, type RefreshRun } from '../../db/ops/refresh-runs.js';
import { type DataStatus, readDataStatus } from '../../db/ops/status.js';
import { createSyncQueue, pauseQueue, readPauseReason, resumeQueue } from '../../jobs/queue.js';
import { createRedis } from '../../jobs/redis.js';
import { createRefreshQueue, SCHEDULER_ID } from '../../jobs/refresh.js';
import type { Config } from '../config.js';
import { describeDbError, ensureRedis, type Io } from './common.js';
import { continueHaltedRefresh } from './refresh.js';

export interface QueueStatus {
  prefix: string;
  counts: Record<string, number>;
  paused: boolean;
  pausedBecause?: string;
  pausedBy?: string;
  pausedAt?: string;
  /** Seconds the oldest waiting job has waited, or null when none waits. */
  oldestWaitingSeconds: number | null;
  /** Milliseconds left of a rate limit (a 429's Retry-After), 0 when none. */
  rateLimitedForMs: number;
  /** When the nightly scheduler fires next (ISO), or null when no worker registered it yet. */
  nextNightlyRefresh: string | null;
  nightlyPattern: string | null;
}

async function withQueue<T>(
  config: Config,
  fn: (q: ReturnType<typeof createSyncQueue>, r: ReturnType<typeof createRedis>) => Promise<T>,
) {
  const redis = createRedis(config.redisUrl);
  const queue = createSyncQueue(redis, { prefix: config.queuePrefix, attempts: config.syncAttempts });
  try {
    await ensureRedis(redis, config.redisUrl);
    return await fn(queue, redis);
  } finally {
    await queue.close().catch(() => {});
    redis.disconnect();
  }
}

/** The queue's state, from connections the caller owns (the admin server reuses it). */
export async function queueStatusOf(
  queue: ReturnType<typeof createSyncQueue>,
  redis: ReturnType<typeof createRedis>,
  prefix: string,
): Promise<QueueStatus> {
  const counts = await queue.getJobCounts(
    'waiting',
    'active',
    'delayed',
    'prioritized',
    'waiting-children',
    'completed',
    'failed',
  );
  const paused = await queue.isPaused();
  const reason = paused ? await readPauseReason(queue, redis) : undefined;
  const [oldest] = await queue.getJobs(['wait', 'prioritized'], 0, 0, true);
  const ttl = await queue.getRateLimitTtl(1);
  const refreshQueue = createRefreshQueue(redis, prefix);
  const scheduler = await refreshQueue.getJobScheduler(SCHEDULER_ID).finally(() => refreshQueue.close());
  return {
    nextNightlyRefresh: scheduler?.next ? new Date(scheduler.next).toISOString() : null,
    nightlyPattern: scheduler?.pattern
      ? `${scheduler.pattern}${scheduler.tz ? ` (${scheduler.tz})` : ''}`
      : null,
    prefix,
    counts,
    paused,
    ...(reason ? { pausedBecause: reason.reason, pausedBy: reason.by, pausedAt: reason.at } : {}),
    oldestWaitingSeconds: oldest ? Math.max(0, Math.round((Date.now() - oldest.timestamp) / 1000)) : null,
    rateLimitedForMs: Math.max(0, ttl),
  };
}

export async function readQueueStatus(config: Config): Promise<QueueStatus> {
  return withQueue(config, (queue, redis) => queueStatusOf(queue, redis, config.queuePrefix));
}

function formatRefresh(r: RefreshRun): string {
  const head = `refresh run ${r.id} (${r.trigger}${r.staleBefore ? `, stale before ${r.staleBefore.toISOString()}` : ''})`;
  const counts =
    `${r.subscribersTotal} subscribers fanned out, ${r.enqueued} enqueued; succeeded ${r.succeeded}, failed ${r.failed}, ` +
    `not found ${r.notFound}, invalid ${r.invalid}; cards added ${r.cardsAdded}, removed ${r.cardsRemoved}`;
  if (r.status === 'halted')
    return `${head}: HALTED by the mass-removal breaker: ${r.haltedReason ?? ''}\n  ${counts}`;
  if (r.status === 'running') {
    const phase = r.fanoutFinishedAt ? 'finishing its last jobs' : `fanning out (cursor ${r.cursor})`;
    return `${head}: running since ${r.startedAt.toISOString()}, ${phase}\n  ${counts}`;
  }
  return `${head}: ${r.status} at ${r.finishedAt?.toISOString() ?? '?'} (started ${r.startedAt.toISOString()})\n  ${counts}`;
}

function formatStatus(
  q: QueueStatus,
  d: (DataStatus & { lastRefresh: RefreshRun | null }) | { error: string },
): string[] {
  const c = q.counts;
  const lines = [`queue saved-cards-sync (prefix ${q.prefix}): ${q.paused ? 'PAUSED' : 'running'}`];
  if (q.paused)
    lines.push(
      `  paused by ${q.pausedBy ?? 'someone'}${q.pausedAt ? ` at ${q.pausedAt}` : ''}${q.pausedBecause ? `: ${q.pausedBecause}` : ''}`,
    );
  if (q.paused) lines.push('  resume with: cards-sync resume');
  lines.push(
    `  waiting ${(c.waiting ?? 0) + (c.prioritized ?? 0)}, active ${c.active ?? 0}, delayed ${c.delayed ?? 0}, failed ${c.failed ?? 0}, completed ${c.completed ?? 0} (kept)`,
  );
  lines.push(
    `  oldest waiting job: ${q.oldestWaitingSeconds === null ? 'none' : `${q.oldestWaitingSeconds} s`}`,
  );
  if (q.rateLimitedForMs > 0) lines.push(`  rate limited by the API for another ${q.rateLimitedForMs} ms`);
  lines.push(
    `nightly refresh: ${q.nextNightlyRefresh ? `next at ${q.nextNightlyRefresh}, cron ${q.nightlyPattern}` : 'not scheduled yet (a worker registers it at start)'}`,
  );
  if ('error' in d) {
    lines.push(`data: ${d.error}`);
    return lines;
  }
  lines.push(
    `data: ${d.subscribers} subscribers, ${d.activeCards} active cards; ${d.syncedWithin24h} synced within 24 h, ${d.neverSucceeded} never synced successfully`,
  );
  lines.push(
    `  last success ${d.lastSuccessAt ?? 'never'}, oldest last success ${d.oldestSuccessAt ?? 'n/a'}`,
  );
  const runs = Object.entries(d.runsLast24h).map(([k, v]) => `${k} ${v}`);
  lines.push(`  syncs in the last 24 h: ${runs.length ? runs.join(', ') : 'none'}`);
  if (d.failuresLast24h.length > 0) {
    lines.push('  failures in the last 24 h by error code:');
    for (const f of d.failuresLast24h)
      lines.push(`    ${f.errorCode.padEnd(18)} ${String(f.count).padStart(7)}  last ${f.lastAt}`);
  }
  lines.push(d.lastRefresh ? formatRefresh(d.lastRefresh) : 'refresh: none has run yet');
  return lines;
}

/** `cards-sync status [--json]`. */
export async function cmdStatus(config: Config, io: Io, opts: { json: boolean }): Promise<number> {
  const queue = await readQueueStatus(config);
  let data: (DataStatus & { lastRefresh: RefreshRun | null }) | { error: string };
  const handle = createDb(config.databaseUrl, { max: 1, timeoutMs: config.databaseTimeoutMs });
  try {
    data = { ...(await readDataStatus(handle.db)), lastRefresh: (await lastRefreshRun(handle.db)) ?? null };
  } catch (error) {
    data = {
      error:
        describeDbError(error, config.databaseUrl) ?? `cannot read Postgres: ${rootCause(error).message}`,
    };
  } finally {
    await handle.close();
  }
  if (opts.json) io.out(JSON.stringify({ queue, data }));
  else for (const line of formatStatus(queue, data)) io.out(line);
  return 'error' in data ? 1 : 0;
}

/** `cards-sync pause`: stops every worker from taking new jobs; in-flight ones finish. */
export async function cmdPause(config: Config, io: Io, opts: { reason?: string }): Promise<number> {
  await withQueue(config, (queue, redis) =>
    pauseQueue(queue, redis, { by: 'operator', reason: opts.reason ?? 'paused by an operator' }),
  );
  io.out('paused: workers finish their current jobs and take no new ones; `cards-sync resume` continues');
  return 0;
}

/** `cards-sync resume`: resumes the queue and continues a refresh run the breaker halted. */
export async function cmdResume(config: Config, io: Io): Promise<number> {
  await withQueue(config, (queue, redis) => resumeQueue(queue, redis));
  let continued: number | undefined;
  try {
    continued = await continueHaltedRefresh(config);
  } catch (error) {
    io.err(
      `cards-sync: resumed the queue, but could not check for a halted refresh: ${describeDbError(error, config.databaseUrl) ?? 'database error'}`,
    );
    return 1;
  }
  io.out(
    continued !== undefined ? `resumed; refresh run ${continued} continues from where it halted` : 'resumed',
  );
  return 0;
}
