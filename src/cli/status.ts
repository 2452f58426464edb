import { type DataStatus, readDataStatus } from '../../db/admin/index.js';
import { type AdminActionRow, recentAdminActions } from '../../db/audit/index.js';
import { createDb } from '../../db/client.js';
import { rootCause } from '../../db/errors.js';
import {
  auditDisagrees,
  countDue,
  type Freshness,
  lastRefreshRun,
  type RefreshRun,
  readFreshness,
} from '../../db/refresh/index.js';
import { createRedis } from '../../jobs/redis.js';
import { progressOf, type QueueStatus, queueStatusOf, readLeaseHolder } from '../../jobs/refresh/index.js';
import { createSyncQueue, type HoldCause, laneWaitsLine } from '../../jobs/sync/index.js';
import { actionJson, describeAction } from '../audit/index.js';
import type { Config } from '../config/index.js';
import { type FleetEntry, fleetRateLimit, formatFleet, liveFleet } from '../fleet/index.js';
import { STALE_MODEL } from '../freshness/index.js';
import { formatDuration, formatTime } from '../shared/index.js';
import {
  type ContinuousStatus,
  continuousStatus,
  estimateBasis,
  isContinuous,
  pauseDetailLines,
  rejectedKeyLines,
} from '../status/index.js';
import { formatWebhooks, readWebhooksStatus, type WebhookStatus } from '../webhooks/index.js';
import { ensureRedis, type Io } from './common.js';
import { describeDbError } from './db-problem.js';
import { formatContinuous } from './status-continuous.js';

const HELD_BY: Record<HoldCause | 'own_limit', string> = {
  api_429: 'rate limited by the API (a 429 and its Retry-After): every worker waits',
  database: 'held while Postgres does not answer: every worker waits',
  own_limit: 'paced by SYNC_RATE_LIMIT_PER_SEC (our own limit, not the API): the next job waits',
};

export async function withQueue<T>(
  config: Config,
  fn: (q: ReturnType<typeof createSyncQueue>, r: ReturnType<typeof createRedis>) => Promise<T>,
) {
  const redis = createRedis(config.redis);
  const queue = createSyncQueue(redis, { prefix: config.queuePrefix, attempts: config.syncAttempts });
  try {
    await ensureRedis(redis, config.redis);
    return await fn(queue, redis);
  } finally {
    await queue.close().catch(() => {});
    redis.disconnect();
  }
}

/** The queue's state; `rateLimitPerSec` is the workers' SYNC_RATE_LIMIT_PER_SEC (default: this process's). */
async function readQueueStatus(
  config: Config,
  rateLimitPerSec = config.syncRateLimitPerSec,
): Promise<QueueStatus> {
  return withQueue(config, (queue, redis) =>
    queueStatusOf(queue, redis, config.queuePrefix, rateLimitPerSec),
  );
}

function formatPlan(r: RefreshRun): string[] {
  const p = progressOf(r);
  const lines: string[] = [];
  if (p.planned !== null) {
    const eta = p.etaAt ? `, ETA ${formatTime(p.etaAt)}` : '';
    const rate = p.ratePerSec !== null ? ` at ${p.ratePerSec}/s` : '';
    const budget = r.rateBudgetPerSec !== null ? ` (budget ${r.rateBudgetPerSec}/s)` : ' (no rate limit set)';
    lines.push(`  progress: ${p.done} of ${p.planned} done${rate}${budget}${eta}`);
  }
  if (p.overrun) lines.push(`  WILL OVERRUN: ${p.overrun}`);
  return lines;
}

export function formatRefresh(r: RefreshRun): string {
  const head = `refresh run ${r.id} (${r.trigger}${r.staleBefore ? `, stale before ${formatTime(r.staleBefore)}` : ''})`;
  const counts =
    `${r.subscribersTotal} subscribers fanned out, ${r.enqueued} enqueued; succeeded ${r.succeeded}, failed ${r.failed}, ` +
    `not found ${r.notFound}, invalid ${r.invalid}; cards added ${r.cardsAdded}, restored ${r.cardsRestored}, removed ${r.cardsRemoved}`;
  if (r.status === 'halted')
    return [
      `${head}: HALTED by the mass-removal breaker: ${r.haltedReason ?? ''}`,
      `  ${counts}`,
      ...formatPlan(r),
    ].join('\n');
  if (r.status === 'running') {
    // Once fanned out, what is left in words that hold with thousands waiting.
    const left = Math.max(0, r.subscribersTotal - (r.succeeded + r.failed + r.notFound + r.invalid));
    const phase = r.fanoutFinishedAt
      ? `fanned out; ${left} of its ${r.subscribersTotal} syncs not ended yet`
      : `fanning out (cursor ${r.cursor})`;
    return [
      `${head}: running since ${formatTime(r.startedAt)}, ${phase}`,
      `  ${counts}`,
      ...formatPlan(r),
    ].join('\n');
  }
  if (r.status === 'empty')
    return `${head}: EMPTY at ${formatTime(r.finishedAt)}: it matched no subscriber, nothing was synced (not a success)`;
  return `${head}: ${r.status} at ${formatTime(r.finishedAt)} (started ${formatTime(r.startedAt)})\n  ${counts}`;
}

/** `95 s (bulk lane); by lane: ops none, bulk 95 s of 600, refresh 11 s of 1200`, or `none`. */
function formatOldestWaiting(q: QueueStatus): string {
  if (q.oldestWaitingSeconds === null) return 'none';
  const lane = q.oldestWaitingLane ? ` (${q.oldestWaitingLane} lane)` : '';
  return `${q.oldestWaitingSeconds} s${lane}; by lane: ${laneWaitsLine(q.lanes)}`;
}

function formatStatus(
  q: QueueStatus,
  d: (DataStatus & { lastRefresh: RefreshRun | null }) | { error: string },
  continuous: ContinuousStatus | null,
): string[] {
  const c = q.counts;
  const lines = [`queue saved-cards-sync (prefix ${q.prefix}): ${q.paused ? 'PAUSED' : 'running'}`];
  if (q.paused)
    lines.push(
      `  paused by ${q.pausedBy ?? 'someone'}${q.pausedAt ? ` at ${formatTime(q.pausedAt)}` : ''}${q.pausedBecause ? `: ${q.pausedBecause}` : ''}`,
    );
  if (q.paused && q.pause) for (const l of pauseDetailLines(q.pause)) lines.push(`    ${l}`);
  if (q.paused) lines.push('  resume with: cards-sync resume');
  for (const l of rejectedKeyLines(q.rejectedKeys)) lines.push(`  ${l}`);
  if (q.bulkLane.paused) {
    lines.push(
      `  bulk lane PAUSED by the mass-removal breaker${q.bulkLane.at ? ` at ${formatTime(q.bulkLane.at)}` : ''}: ${q.bulkLane.reason ?? ''}`,
    );
    lines.push(
      `  ${q.bulkLane.held} bulk jobs held (files, resync requests of over 100); single re-syncs go on; resume with: cards-sync resume`,
    );
  }
  lines.push(
    `  waiting ${(c.waiting ?? 0) + (c.prioritized ?? 0)}, active ${c.active ?? 0}, delayed ${c.delayed ?? 0}, failed ${c.failed ?? 0}, completed ${c.completed ?? 0} (jobs kept in Redis)`,
  );
  lines.push(`  oldest waiting job: ${formatOldestWaiting(q)}`);
  const held = HELD_BY[q.rateLimitedBy ?? 'own_limit'];
  if (q.rateLimitedForMs > 0) lines.push(`  ${held} for another ${q.rateLimitedForMs} ms`);
  // In continuous mode there is no nightly run to announce: the window's lines say what runs.
  if (!isContinuous(q, 'error' in d ? null : d.lastRefresh))
    lines.push(
      `nightly refresh: ${q.nextNightlyRefresh ? `next at ${formatTime(q.nextNightlyRefresh)}, cron ${q.nightlyPattern}` : 'not scheduled yet (a worker registers it at start)'}`,
    );
  if ('error' in d) {
    lines.push(`data: ${d.error}`);
    return lines;
  }
  lines.push(
    `data: ${d.subscribers} subscribers, ${d.activeCards} active cards; ${d.syncedWithin24h} synced within 24 h, ${d.neverSucceeded} never synced successfully`,
  );
  if (d.forgottenLast24h > 0)
    lines.push(
      `  ${d.forgottenLast24h} enqueued id${d.forgottenLast24h === 1 ? '' : 's'} the API did not know ${d.forgottenLast24h === 1 ? 'was' : 'were'} forgotten in the last 24 h (not counted above; their runs stay in sync_runs)`,
    );
  lines.push(
    `  last success ${d.lastSuccessAt ? formatTime(d.lastSuccessAt) : 'never'}, oldest last success ${d.oldestSuccessAt ? formatTime(d.oldestSuccessAt) : 'n/a'}`,
  );
  const runs = Object.entries(d.runsLast24h).map(([k, v]) => `${k} ${v}`);
  lines.push(`  syncs in the last 24 h: ${runs.length ? runs.join(', ') : 'none'}`);
  if (d.failuresLast24h.length > 0) {
    lines.push('  failed attempts in the last 24 h by error code (sync_runs):');
    for (const f of d.failuresLast24h)
      lines.push(
        `    ${f.errorCode.padEnd(18)} ${String(f.count).padStart(7)}  last ${formatTime(f.lastAt)}`,
      );
  }
  if (d.conflicts.open > 0) {
    lines.push(
      `  CONFLICTS: ${d.conflicts.open} card${d.conflicts.open === 1 ? '' : 's'} listed by two subscribers at once ` +
        `(oldest since ${formatTime(d.conflicts.oldestOpenedAt ?? '')}); each stays with its holder and its token is refused ` +
        '(card_conflicts where resolved_at is null)',
    );
  }
  if (continuous !== null) {
    // A refresh started by hand holds the windows back while it runs: it is shown as itself.
    if (d.lastRefresh && d.lastRefresh.trigger !== 'continuous') lines.push(formatRefresh(d.lastRefresh));
    lines.push(...formatContinuous(continuous));
  } else lines.push(d.lastRefresh ? formatRefresh(d.lastRefresh) : 'refresh: none has run yet');
  return lines;
}

const pct = (x: number | null) => (x === null ? 'n/a' : `${(x * 100).toFixed(2)}%`);

/** The freshness lines of `status`: the model's estimate, the audit, the max age. */
function formatFreshness(f: Freshness): string[] {
  const lines = [
    `freshness (${f.mode ?? 'no refresh plan yet'}): estimated stale ${pct(f.estimatedStaleRatio)} of subscribers` +
      (f.audit.samples > 0
        ? `; audit ${pct(f.audit.staleRatio)} found changed [95%: ${pct(f.audit.low)} – ${pct(f.audit.high)}] of ${f.audit.samples} random re-syncs`
        : '; audit: no sample yet'),
    `  ${estimateBasis(f)}`,
    `  max age ${formatDuration(f.maxAgeSeconds)}: ${f.pastMaxAge} subscribers past it, ${f.neverSynced} never synced${f.sampled ? ' (from a sample)' : ''}`,
  ];
  if (f.budget) {
    const b = f.budget;
    lines.push(
      `  budget: ${pct(b.plan)} to the plan (each subscriber by its rate, the max age), ${pct(b.coverage)} to coverage` +
        `${b.coverageSeconds !== null ? ` (nobody waits longer than ${formatDuration(b.coverageSeconds)})` : ''}, ${pct(b.audit)} to the audit`,
    );
  }
  if (f.budget?.auditAction === 'round-robin')
    lines.push(
      "  MODEL DISAGREES, ACTED ON: the audit's interval is far from the estimate, or the plan's own syncs found far more changed than it expected (every token reissued, say), so the plan no longer trusts the rates and goes round every subscriber in turn (round robin) until the two agree again (docs/refresh.md)",
    );
  else if (f.budget?.auditAction === 'estimate-high')
    lines.push(
      "  MODEL DISAGREES, ACTED ON: the estimate was above what the audit finds (the population's rate, learnt from the subscribers the plan syncs most, read them busier than they are), so the plan's population rate is fitted from the audit's own uniform draws (refresh_policy.prior_rate_per_day) and the plan made on it, until the two agree again (docs/refresh.md)",
    );
  else if (auditDisagrees(f))
    lines.push(
      "  MODEL DISAGREES: the audit's interval excludes the estimate; the change-rate model is wrong for this population (see docs/runbooks.md, CardsSyncFreshnessModelWrong). " +
        "The plan acts once the estimate is further off than its usual error (30%, or 0.3 point, outside the audit's interval), judged on the audit's draws under plans of the kind in force",
    );
  if (f.keepsMaxAge === false && f.budgetKeepsMaxAge !== false)
    lines.push(
      `  MAX AGE NOT KEPT: ${f.pastMaxAge} subscribers past REFRESH_MAX_AGE although the budget suffices; a lowered max age is caught up at the next replan, failing syncs are not (see their errors)`,
    );
  if (f.budgetKeepsMaxAge === false) {
    // Where the budget cannot keep the max age the plan's longest interval is longer than it
    // (src/freshness STRETCH_CYCLES): say what the wallets that never change wait instead.
    const longest = f.budget?.coverageSeconds;
    lines.push(
      '  CANNOT KEEP MAX AGE: the refresh budget cannot sync every subscriber once per REFRESH_MAX_AGE; raise REFRESH_BUDGET_PER_SEC or lengthen REFRESH_MAX_AGE' +
        (longest != null && longest > f.maxAgeSeconds
          ? `. Until then a wallet that never changes waits up to ${formatDuration(longest)}, and the budget that frees goes to those that change, by their rates (round robin would keep nobody within the max age either)`
          : ''),
    );
  }
  return lines;
}

/** Operator actions `status` lists. */
const STATUS_ACTIONS = 5;

/** The newest operator actions, or why they cannot be read. */
type RecentActions = AdminActionRow[] | { error: string };

function formatActions(actions: RecentActions): string[] {
  if ('error' in actions) return [`recent operator actions: cannot read them: ${actions.error}`];
  if (actions.length === 0) return ['recent operator actions: none recorded'];
  return [
    'recent operator actions (admin_actions, newest first):',
    ...actions.map((a) => `  ${describeAction(a)}`),
  ];
}

/** `cards-sync status [--json]`. */
export async function cmdStatus(config: Config, io: Io, opts: { json: boolean }): Promise<number> {
  const handle = createDb(config.databaseUrl, { max: 1, timeoutMs: config.databaseTimeoutMs });
  // A database before migration 0017 has no fleet, one away none to read: say nothing of it then.
  const fleet: FleetEntry[] | null = await liveFleet(handle.pool).catch(() => null);
  // The workers' pace, as the registry has it (like REFRESH_MAX_AGE, which the plan records), not
  // this shell's: a `status` run without SYNC_RATE_LIMIT_PER_SEC still tells their pacing apart.
  const queue = await readQueueStatus(config, fleetRateLimit(fleet ?? [], config.syncRateLimitPerSec)).catch(
    async (error: unknown) => {
      await handle.close();
      throw error;
    },
  );
  let data: (DataStatus & { lastRefresh: RefreshRun | null }) | { error: string };
  let actions: RecentActions | undefined;
  let freshness: Freshness | null = null;
  let webhooks: WebhookStatus[] | null = null;
  let continuous: ContinuousStatus | null = null;
  try {
    data = { ...(await readDataStatus(handle.db)), lastRefresh: (await lastRefreshRun(handle.db)) ?? null };
    freshness = await readFreshness(handle.pool, config.refreshMaxAgeMs, STALE_MODEL);
    if (isContinuous(queue, data.lastRefresh)) {
      const { lastRefresh, oldestSuccessAt } = data;
      continuous = continuousStatus({
        lastRefresh,
        freshness,
        oldestSuccessAt,
        dueNow: await countDue(handle.pool),
        // Redis only names the holder: without it, Postgres still tells whether one holds the lease.
        leaseHolder: await withQueue(config, (_queue, redis) =>
          readLeaseHolder(handle.pool, redis, config.queuePrefix),
        ).catch(() => readLeaseHolder(handle.pool, null, config.queuePrefix)),
      });
    }
    webhooks = await readWebhooksStatus(handle.pool, config.changeEventsRetentionDays).catch(() => null);
    actions = await recentAdminActions(handle.db, STATUS_ACTIONS).catch((error: unknown) => ({
      error: describeDbError(error, config.databaseUrl) ?? rootCause(error).message,
    }));
  } catch (error) {
    data = {
      error:
        describeDbError(error, config.databaseUrl) ?? `cannot read Postgres: ${rootCause(error).message}`,
    };
  } finally {
    await handle.close();
  }
  if (opts.json) {
    const refresh =
      'error' in data || data.lastRefresh === null || !['running', 'halted'].includes(data.lastRefresh.status)
        ? null
        : progressOf(data.lastRefresh);
    const recentActions = actions === undefined || 'error' in actions ? null : actions.map(actionJson);
    io.out(
      JSON.stringify({
        queue,
        data,
        freshness,
        fleet,
        webhooks,
        refreshProgress: refresh,
        continuous,
        recentActions,
      }),
    );
  } else {
    for (const line of formatStatus(queue, data, continuous)) io.out(line);
    if (freshness) for (const line of formatFreshness(freshness)) io.out(line);
    if (fleet) for (const line of formatFleet(fleet)) io.out(line);
    if (webhooks) for (const line of formatWebhooks(webhooks, config.changeEventsRetentionDays)) io.out(line);
    if (actions !== undefined) for (const line of formatActions(actions)) io.out(line);
  }
  return 'error' in data ? 1 : 0;
}
