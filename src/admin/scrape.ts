import { freshnessBuckets, lastRefreshCompletedAt } from '../../db/admin/index.js';
import { poolOf } from '../../db/client.js';
import { inProgressRun, type RefreshRun, readFreshness } from '../../db/refresh/index.js';
import { conflictSummary } from '../../db/sync/index.js';
import { AUTO_DISABLED_REASON } from '../../db/webhooks/index.js';
import { progressOf } from '../../jobs/refresh/index.js';
import { bulkPauseKey, readPauseReason } from '../../jobs/sync/index.js';
import { fleetCounts, fleetDisagreements, liveFleet } from '../fleet/index.js';
import { STALE_MODEL } from '../freshness/index.js';
import { type Metrics, STALE_AFTER_HOURS } from '../metrics/index.js';
import { DEFAULT_RETENTION_DAYS, readWebhooksStatus } from '../webhooks/index.js';
import { type AdminDeps, maxAgeOf } from './deps.js';

/**
 * The gauges read at scrape time, from Redis and Postgres: queue counts and state, workers,
 * freshness and the refresh. A source that does not answer leaves its gauges as they were rather
 * than failing the scrape (the process metrics still come through).
 */
export async function collectGauges(
  deps: Pick<
    AdminDeps,
    'db' | 'redis' | 'syncQueue' | 'metrics' | 'changeEventsRetentionDays' | 'refreshMaxAgeMs'
  >,
): Promise<void> {
  const m: Metrics = deps.metrics;
  const retentionDays = deps.changeEventsRetentionDays ?? DEFAULT_RETENTION_DAYS;
  const prefix = deps.syncQueue.opts.prefix ?? 'bull';
  const [counts, lastRefresh, current, fresh, paused, workers, conflicts, bulkPause, model, fleet, webhooks] =
    await Promise.all([
      deps.syncQueue
        .getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'completed', 'failed')
        .catch(() => undefined),
      lastRefreshCompletedAt(deps.db).catch(() => null),
      inProgressRun(deps.db).catch(() => undefined),
      freshnessBuckets(deps.db, STALE_AFTER_HOURS).catch(() => undefined),
      deps.syncQueue.isPaused().catch(() => undefined),
      deps.syncQueue.getWorkersCount().catch(() => undefined),
      conflictSummary(deps.db).catch(() => undefined),
      deps.redis.exists(bulkPauseKey(prefix)).catch(() => undefined),
      // REFRESH_MAX_AGE as the refresh's plan recorded it (this process's before there is one, as status reads it).
      readFreshness(poolOf(deps.db), maxAgeOf(deps), STALE_MODEL).catch(() => undefined),
      liveFleet(poolOf(deps.db)).catch(() => undefined),
      readWebhooksStatus(poolOf(deps.db), retentionDays).catch(() => undefined),
    ]);
  if (fleet) {
    // Reset first: a release or role that left must not linger at its last count.
    m.fleetProcesses.reset();
    for (const c of fleetCounts(fleet)) m.fleetProcesses.set({ version: c.version, role: c.role }, c.count);
    m.fleetSettingsDiffer.set(fleetDisagreements(fleet).length);
  }
  m.changeEventsRetention.set(retentionDays * 86_400);
  if (webhooks) {
    // Reset first: an endpoint deleted must not linger at its last value.
    m.webhookLag.reset();
    m.webhookDeadLetters.reset();
    m.webhookAutoDisabled.reset();
    for (const e of webhooks) {
      m.webhookLag.set({ endpoint: String(e.id) }, e.lagSeconds);
      m.webhookDeadLetters.set({ endpoint: String(e.id) }, e.deadLetters);
      const auto = e.disabledReason?.startsWith(AUTO_DISABLED_REASON) === true;
      m.webhookAutoDisabled.set({ endpoint: String(e.id) }, auto ? 1 : 0);
    }
    // The deliveries counter is this process's own, counted as they happen: an endpoint removed
    // since (docs/webhooks.md, "Removed") leaves it too.
    const listed = new Set(webhooks.map((e) => String(e.id)));
    for (const v of (await m.webhookDeliveries.get()).values) {
      const endpoint = v.labels.endpoint;
      if (endpoint !== undefined && !listed.has(String(endpoint))) m.webhookDeliveries.remove(v.labels);
    }
  }
  if (model) {
    m.estimatedStaleRatio.set(model.estimatedStaleRatio);
    m.estimatedStaleRatioLow.set(model.estimate.low);
    m.estimatedStaleRatioHigh.set(model.estimate.high);
    m.estimateSubscribers.set({ basis: 'learned' }, model.estimate.learned);
    m.estimateSubscribers.set({ basis: 'synced_once' }, model.estimate.syncedOnce);
    m.estimateSubscribers.set({ basis: 'never_synced' }, model.estimate.neverSynced);
    m.estimateSubscribers.set({ basis: 'not_upstream' }, model.estimate.notUpstream);
    m.auditStaleRatio.set(model.audit.staleRatio ?? Number.NaN);
    m.auditStaleRatioLow.set(model.audit.low ?? Number.NaN);
    m.auditStaleRatioHigh.set(model.audit.high ?? Number.NaN);
    m.auditSamples.set(model.audit.samples);
    m.pastMaxAge.set(model.pastMaxAge);
  }
  if (counts) for (const [state, n] of Object.entries(counts)) m.jobs.set({ state }, n);
  m.lastRefreshSuccess.set(lastRefresh ? lastRefresh.getTime() / 1000 : 0);
  setRefreshGauges(m, current);
  if (fresh) {
    m.freshness.set({ age: 'within_1h' }, fresh.within1h);
    m.freshness.set({ age: 'within_24h' }, fresh.within24h);
    m.freshness.set({ age: 'within_7d' }, fresh.within7d);
    m.freshness.set({ age: 'older' }, fresh.older);
    m.freshness.set({ age: 'never' }, fresh.never);
    m.staleSubscribers.set(fresh.stale);
    m.oldestSuccess.set(fresh.oldestSuccessAt ? Math.round(fresh.oldestSuccessAt.getTime() / 1000) : 0);
  }
  if (paused !== undefined) {
    const reason = paused
      ? await readPauseReason(deps.syncQueue, deps.redis).catch(() => undefined)
      : undefined;
    m.paused.set(paused ? 1 : 0);
    const since = reason ? Date.parse(reason.at) : Number.NaN;
    m.pausedSince.set(paused && Number.isFinite(since) ? Math.round(since / 1000) : 0);
    m.keyRejected.set(reason?.by === 'auth_rejected' ? 1 : 0);
  }
  if (workers !== undefined) m.workers.set(workers);
  if (conflicts) m.cardConflicts.set(conflicts.open);
  if (bulkPause !== undefined) m.bulkLanePaused.set(bulkPause > 0 ? 1 : 0);
}

/** The refresh gauges, from the run in progress (all 0 when none is). */
function setRefreshGauges(metrics: Metrics, run: RefreshRun | undefined): void {
  const p = run ? progressOf(run) : undefined;
  metrics.refreshSubscribers.set({ state: 'planned' }, p?.planned ?? 0);
  metrics.refreshSubscribers.set({ state: 'done' }, p?.done ?? 0);
  metrics.refreshRate.set(p?.ratePerSec ?? 0);
  metrics.refreshEta.set(p?.etaAt ? Math.round(p.etaAt.getTime() / 1000) : 0);
  metrics.refreshOverrun.set(p?.overrun ? 1 : 0);
}
