import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { RefreshRun } from '../db/ops/refresh-runs.js';
import { progressOf } from '../jobs/refresh-plan.js';

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
}

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
    refreshOverrun: new Gauge({
      name: 'cards_sync_refresh_overrun',
      help: '1 when the refresh in progress cannot finish before the next scheduled refresh, at the configured rate or its own',
      registers: [registry],
    }),
  };
}

/** The refresh gauges, from the run in progress (all 0 when none is). */
export function setRefreshGauges(metrics: Metrics, run: RefreshRun | undefined): void {
  const p = run ? progressOf(run) : undefined;
  metrics.refreshSubscribers.set({ state: 'planned' }, p?.planned ?? 0);
  metrics.refreshSubscribers.set({ state: 'done' }, p?.done ?? 0);
  metrics.refreshRate.set(p?.ratePerSec ?? 0);
  metrics.refreshEta.set(p?.etaAt ? Math.round(p.etaAt.getTime() / 1000) : 0);
  metrics.refreshOverrun.set(p?.overrun ? 1 : 0);
}
