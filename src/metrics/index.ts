import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

// The Prometheus metrics (docs/monitoring.md): the registry a process observes into.

/**
 * The Prometheus metrics of one process. Workers observe syncs into it; the admin server
 * serves it at /metrics, adding queue and freshness gauges at scrape time.
 */
export interface Metrics {
  registry: Registry;
  syncOutcomes: Counter<'status'>;
  jobDuration: Histogram<'status'>;
  apiRequests: Counter<'code'>;
  apiLatency: Histogram<'code'>;
  cards: Counter<'change'>;
  jobs: Gauge<'state'>;
  lastRefreshSuccess: Gauge;
  writeBatchSize: Histogram;
  refreshSubscribers: Gauge<'state'>;
  refreshRate: Gauge;
  refreshEta: Gauge;
  refreshOverrun: Gauge;
  freshness: Gauge<'age'>;
  oldestSuccess: Gauge;
  staleSubscribers: Gauge;
  paused: Gauge;
  pausedSince: Gauge;
  keyRejected: Gauge;
  workers: Gauge;
  cardConflicts: Gauge;
  bulkLanePaused: Gauge;
  estimatedStaleRatio: Gauge;
  estimatedStaleRatioLow: Gauge;
  estimatedStaleRatioHigh: Gauge;
  estimateSubscribers: Gauge<'basis'>;
  auditStaleRatio: Gauge;
  auditStaleRatioLow: Gauge;
  auditStaleRatioHigh: Gauge;
  auditSamples: Gauge;
  pastMaxAge: Gauge;
  fleetProcesses: Gauge<'version' | 'role'>;
  fleetSettingsDiffer: Gauge;
  webhookDeliveries: Counter<'endpoint' | 'outcome'>;
  webhookLag: Gauge<'endpoint'>;
  webhookDeadLetters: Gauge<'endpoint'>;
  /** 1 for an endpoint cards-sync disabled itself after it failed for days; 0 for the others. */
  webhookAutoDisabled: Gauge<'endpoint'>;
  /** `CHANGE_EVENTS_RETENTION_DAYS` in seconds: how old the lag may grow before waiting events are dropped. */
  changeEventsRetention: Gauge;
  /** Change events written with their change and committed, by type: `card.added`, … */
  changeEvents: Counter<'type'>;
}

/** A subscriber counts as stale (`cards_sync_stale_subscribers`) with no successful sync for this long. */
export const STALE_AFTER_HOURS = 36;

export function createMetrics(options: { defaultMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  if (options.defaultMetrics !== false) collectDefaultMetrics({ register: registry, prefix: 'cards_sync_' });
  return {
    registry,
    syncOutcomes: new Counter({
      name: 'cards_sync_sync_outcomes_total',
      help: 'Sync attempts by outcome (sync_runs.status)',
      labelNames: ['status'],
      registers: [registry],
    }),
    jobDuration: new Histogram({
      name: 'cards_sync_job_duration_seconds',
      help: 'Duration of sync jobs, fetch and write, by outcome',
      labelNames: ['status'],
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    }),
    apiRequests: new Counter({
      name: 'cards_sync_api_requests_total',
      help: 'Requests to the Saved Cards API by HTTP status code (or timeout / connection)',
      labelNames: ['code'],
      registers: [registry],
    }),
    apiLatency: new Histogram({
      name: 'cards_sync_api_request_duration_seconds',
      help: 'Latency of requests to the Saved Cards API by HTTP status code',
      labelNames: ['code'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    cards: new Counter({
      name: 'cards_sync_cards_total',
      help: 'Card changes written, by kind (inserted, updated, removed, restored)',
      labelNames: ['change'],
      registers: [registry],
    }),
    jobs: new Gauge({
      name: 'cards_sync_jobs',
      help: 'Sync jobs in the queue by state (read at scrape time)',
      labelNames: ['state'],
      registers: [registry],
    }),
    lastRefreshSuccess: new Gauge({
      name: 'cards_sync_last_refresh_success_timestamp_seconds',
      help: 'When the last refresh run completed (Unix time), 0 if none has',
      registers: [registry],
    }),
    writeBatchSize: new Histogram({
      name: 'cards_sync_write_batch_size',
      help: 'Syncs written per database transaction (group commit)',
      buckets: [1, 2, 4, 8, 16, 32, 64],
      registers: [registry],
    }),
    refreshSubscribers: new Gauge({
      name: 'cards_sync_refresh_subscribers',
      help: 'The refresh in progress: subscribers planned at its start and done so far (0 when none runs)',
      labelNames: ['state'],
      registers: [registry],
    }),
    refreshRate: new Gauge({
      name: 'cards_sync_refresh_rate_per_second',
      help: 'The refresh in progress: syncs a second, averaged since it began (0 when none runs)',
      registers: [registry],
    }),
    refreshEta: new Gauge({
      name: 'cards_sync_refresh_eta_timestamp_seconds',
      help: 'The refresh in progress: when it should end at its rate (Unix time; 0 when unknown or none runs)',
      registers: [registry],
    }),
    freshness: new Gauge({
      name: 'cards_sync_subscribers_by_freshness',
      help: 'Subscribers by time since their last successful sync (age: within_1h, within_24h, within_7d, older, never)',
      labelNames: ['age'],
      registers: [registry],
    }),
    oldestSuccess: new Gauge({
      name: 'cards_sync_oldest_success_timestamp_seconds',
      help: "The oldest of the subscribers' last successful syncs (Unix time; 0 when none has succeeded)",
      registers: [registry],
    }),
    staleSubscribers: new Gauge({
      name: 'cards_sync_stale_subscribers',
      help: `Subscribers with no successful sync for ${STALE_AFTER_HOURS} hours, or never`,
      registers: [registry],
    }),
    paused: new Gauge({
      name: 'cards_sync_queue_paused',
      help: '1 while the sync queue is paused (by an operator, the breaker or a rejected API key)',
      registers: [registry],
    }),
    pausedSince: new Gauge({
      name: 'cards_sync_queue_paused_since_timestamp_seconds',
      help: 'When the sync queue was paused (Unix time; 0 while it runs)',
      registers: [registry],
    }),
    keyRejected: new Gauge({
      name: 'cards_sync_api_key_rejected',
      help: '1 while processing is paused because the Saved Cards API rejected the key (401/403)',
      registers: [registry],
    }),
    workers: new Gauge({
      name: 'cards_sync_workers',
      help: 'Worker connections on the sync queue, as Redis counts them',
      registers: [registry],
    }),
    bulkLanePaused: new Gauge({
      name: 'cards_sync_bulk_lane_paused',
      help: '1 while the mass-removal breaker holds the bulk lane (files, resync requests of over 100 subscribers)',
      registers: [registry],
    }),
    cardConflicts: new Gauge({
      name: 'cards_sync_card_conflicts',
      help: 'Cards listed by two subscribers at once (card_conflicts still open): each stays with its holder, and its token is not handed out',
      registers: [registry],
    }),
    estimatedStaleRatio: new Gauge({
      name: 'cards_sync_estimated_stale_ratio',
      help: "The freshness model's expected share of subscribers whose stored cards differ from upstream now",
      registers: [registry],
    }),
    estimatedStaleRatioLow: new Gauge({
      name: 'cards_sync_estimated_stale_ratio_low',
      help: "Lower end of the estimate's 95% interval if every estimated change rate is right (the audit checks that they are)",
      registers: [registry],
    }),
    estimatedStaleRatioHigh: new Gauge({
      name: 'cards_sync_estimated_stale_ratio_high',
      help: "Upper end of the estimate's 95% interval if every estimated change rate is right",
      registers: [registry],
    }),
    estimateSubscribers: new Gauge({
      name: 'cards_sync_estimate_subscribers',
      help: 'Subscribers the stale estimate covers, by what it knows of each: learned (own syncs), synced_once (the population rate), never_synced (stale for sure); not_upstream: never synced, not found upstream, left out',
      labelNames: ['basis'],
      registers: [registry],
    }),
    auditStaleRatio: new Gauge({
      name: 'cards_sync_audit_stale_ratio',
      help: 'Share found changed among the audit: uniform random re-syncs of the last REFRESH_MAX_AGE (NaN with no sample)',
      registers: [registry],
    }),
    auditStaleRatioLow: new Gauge({
      name: 'cards_sync_audit_stale_ratio_low',
      help: "Lower end of the audit's 95% interval (Wilson; NaN with no sample)",
      registers: [registry],
    }),
    auditStaleRatioHigh: new Gauge({
      name: 'cards_sync_audit_stale_ratio_high',
      help: "Upper end of the audit's 95% interval (Wilson; NaN with no sample)",
      registers: [registry],
    }),
    auditSamples: new Gauge({
      name: 'cards_sync_audit_samples',
      help: 'Audit re-syncs (trigger audit, succeeded) of the last REFRESH_MAX_AGE',
      registers: [registry],
    }),
    pastMaxAge: new Gauge({
      name: 'cards_sync_subscribers_past_max_age',
      help: 'Subscribers whose last successful sync is older than REFRESH_MAX_AGE',
      registers: [registry],
    }),
    fleetProcesses: new Gauge({
      name: 'cards_sync_fleet_processes',
      help: 'Live processes of the fleet (fleet_processes, beat within 45 s), by release and role',
      labelNames: ['version', 'role'] as const,
      registers: [registry],
    }),
    fleetSettingsDiffer: new Gauge({
      name: 'cards_sync_fleet_settings_differ',
      help: 'Shared settings (every variable that docs/configuration.md marks shared) on which live workers disagree',
      registers: [registry],
    }),
    webhookDeliveries: new Counter({
      name: 'cards_sync_webhook_deliveries_total',
      help: 'Webhook attempts this worker made, by endpoint id and outcome (delivered, retry, dead, lost)',
      labelNames: ['endpoint', 'outcome'] as const,
      registers: [registry],
    }),
    webhookLag: new Gauge({
      name: 'cards_sync_webhook_lag_seconds',
      help: 'Age of the oldest undelivered event of each webhook endpoint, enabled or disabled (0 when none waits; read at scrape time)',
      labelNames: ['endpoint'] as const,
      registers: [registry],
    }),
    webhookDeadLetters: new Gauge({
      name: 'cards_sync_webhook_dead_letters',
      help: 'Dead-lettered deliveries of each webhook endpoint (read at scrape time)',
      labelNames: ['endpoint'] as const,
      registers: [registry],
    }),
    webhookAutoDisabled: new Gauge({
      name: 'cards_sync_webhook_endpoint_auto_disabled',
      help: 'Webhook endpoints cards-sync disabled after they failed for days (1), by endpoint id (read at scrape time)',
      labelNames: ['endpoint'] as const,
      registers: [registry],
    }),
    changeEventsRetention: new Gauge({
      name: 'cards_sync_change_events_retention_seconds',
      help: 'CHANGE_EVENTS_RETENTION_DAYS of this process, in seconds: change events older than this are dropped, whether every webhook endpoint had them or not',
      registers: [registry],
    }),
    changeEvents: new Counter({
      name: 'cards_sync_change_events_total',
      help: "Change events this process's syncs wrote in the same transaction as their change, counted once committed, by type",
      labelNames: ['type'] as const,
      registers: [registry],
    }),
    refreshOverrun: new Gauge({
      name: 'cards_sync_refresh_overrun',
      help: '1 when the refresh in progress cannot finish before the next scheduled refresh, at the configured rate or its own',
      registers: [registry],
    }),
  };
}
