import { breakingAhead, tooOldMessage } from '../../db/breaking.js';
import { createDb, type DbHandle } from '../../db/client.js';
import { knownMigration } from '../../db/migrate.js';
import { createRedis, type RedisClient, settlesWithin } from '../../jobs/redis.js';
import {
  createRefreshQueue,
  type RefreshPlanSettings,
  registerRefreshMode,
  startRefreshWorker,
} from '../../jobs/refresh/index.js';
import { createSyncQueue, type SyncWorker, startSyncWorker } from '../../jobs/sync/index.js';
import { startChangeEventsMaintenance, startLedgerMaintenance } from '../../jobs/upkeep/index.js';
import { startWebhookDelivery, type WebhookDelivery } from '../../jobs/webhooks/index.js';
import { startAdmin } from '../admin/index.js';
import { type ApiClient, createApiClient } from '../api/index.js';
import { type ApiConfig, type Config, requireApi, requireCardTokens } from '../config/index.js';
import { type FleetMembership, joinFleet, liveFleet, thisProcess } from '../fleet/index.js';
import { createLogger, type Logger } from '../logging/index.js';
import { createMetrics, type Metrics } from '../metrics/index.js';
import { CliError, onShutdown, packageVersion } from '../shared/index.js';
import { endpointProblems, tracingWanted } from '../tracing/index.js';
import type { RetrySchedule } from '../webhooks/index.js';
import { ensureRedis, type Io } from './common.js';
import { checkBeforeStart } from './worker-checks.js';
import { untilIdle } from './worker-idle.js';

export interface WorkerCliOptions {
  concurrency?: number;
  exitWhenIdle: boolean;
  /** Also run the admin server in this process, sharing its metrics. */
  admin?: boolean;
  /** How long SIGTERM waits for in-flight jobs, ms. Default 30000. */
  shutdownTimeoutMs: number;
  /**
   * Internal, for tests (no flag or variable reaches it): webhook delivery's retry schedule.
   * Default `DEFAULT_SCHEDULE` (src/webhooks/backoff.ts): about a day of retries, 5 s doubling.
   */
  webhookSchedule?: RetrySchedule;
}

/** What the start-up checks found and made, before any connection that waits. */
interface Checked {
  readonly config: Config;
  readonly io: Io;
  readonly opts: WorkerCliOptions;
  readonly apiConfig: ApiConfig;
  readonly tokens: ReturnType<typeof requireCardTokens>;
  readonly concurrency: number;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly known: string;
}

/** The worker's parts, built before anything starts, and what runs: `stopWorker` closes what there is. */
interface Worker extends Checked {
  readonly redis: RedisClient;
  readonly queue: ReturnType<typeof createSyncQueue>;
  readonly handle: DbHandle;
  readonly refreshHandle: DbHandle;
  readonly api: ApiClient;
  readonly refreshQueue: ReturnType<typeof createRefreshQueue>;
  sync?: SyncWorker;
  refresh?: Awaited<ReturnType<typeof startRefreshWorker>>;
  admin?: Awaited<ReturnType<typeof startAdmin>>;
  fleet?: FleetMembership;
  ledger?: ReturnType<typeof startLedgerMaintenance>;
  events?: ReturnType<typeof startChangeEventsMaintenance>;
  webhooks?: WebhookDelivery;
  stopped?: Promise<number>;
  /** Set when a breaking migration this release does not know was applied while it ran. */
  tooOld?: string;
  /** Set when the API rejected this process's key while another key works for the fleet. */
  keyRejected?: string;
  leaveForNewer?: (code: number) => void;
}

/** `cards-sync worker`: processes sync jobs until signalled (or until idle with --exit-when-idle). */
export async function cmdWorker(config: Config, io: Io, opts: WorkerCliOptions): Promise<number> {
  const w = buildWorker(await startUpChecks(config, io, opts));
  // Signals are handled before any job can start, so that a SIGTERM always finishes what runs.
  onShutdown((signal) => stopWorker(w, signal), opts.shutdownTimeoutMs + 5000);

  const fleet = await enterFleet(w);
  if (w.stopped !== undefined) {
    // Signalled while joining: stop() ran without a row to remove.
    await settlesWithin(fleet.leave(), 2000);
    return w.stopped;
  }
  w.sync = await startSync(w, fleet);
  if (w.stopped !== undefined) {
    await w.sync.close(opts.shutdownTimeoutMs);
    return w.stopped;
  }
  w.refresh = await startRefresh(w, fleet);
  if (w.stopped !== undefined) {
    await w.refresh.close();
    return w.stopped;
  }
  await startBeside(w, fleet);
  const nextRefresh = await registerRefreshMode(w.refreshQueue, config.refreshMode, {
    pattern: config.refreshCron,
    tz: config.refreshTz,
  });
  logStarted(w, fleet, nextRefresh);
  return untilEnd(w);
}

/** The configuration's requirements, the tracing endpoint, the database's state and Redis, checked before anything is built. */
async function startUpChecks(config: Config, io: Io, opts: WorkerCliOptions): Promise<Checked> {
  const apiConfig = requireApi(config);
  const tokens = requireCardTokens(config.tokens);
  const concurrency = opts.concurrency ?? config.syncConcurrency;
  const logger = createLogger({ level: config.logLevel });
  // An OTLP endpoint the SDK passes over in silence (`127.0.0.1:4318`, no scheme) would leave the
  // worker's traces going elsewhere or nowhere with nothing said: one line at start says so.
  const endpoints = tracingWanted(io.env) ? endpointProblems(io.env) : [];
  if (endpoints.length > 0) logger.warn(`tracing: ${endpoints.join('; ')}`);
  const metrics = createMetrics();
  const known = knownMigration();
  await checkBeforeStart(config, logger, known);
  // A blocking connection waits forever for Redis: check on a fail-fast one first.
  const probe = createRedis(config.redis);
  try {
    await ensureRedis(probe, config.redis);
  } finally {
    probe.disconnect();
  }
  return { config, io, opts, apiConfig, tokens, concurrency, logger, metrics, known };
}

/** The connections, pools, queues and API client the worker's parts share. */
function buildWorker(checked: Checked): Worker {
  const { config, concurrency } = checked;
  const redis = createRedis(config.redis, { blocking: true });
  const queue = createSyncQueue(redis, { prefix: config.queuePrefix, attempts: config.syncAttempts });
  const handle = createDb(config.databaseUrl, {
    max: Math.min(concurrency + 2, 50),
    applicationName: 'cards-sync worker',
    timeoutMs: config.databaseTimeoutMs,
  });
  // The refresh job's statements cover a whole run (its closing counts read every sync of it):
  // they may take far longer than a sync's, so they get a pool and a deadline of their own.
  const refreshHandle = createDb(config.databaseUrl, {
    max: 2,
    applicationName: 'cards-sync refresh',
    timeoutMs: config.databaseTimeoutMs * 10,
  });
  const api = createApiClient(checked.apiConfig, { connections: concurrency });
  const refreshQueue = createRefreshQueue(redis, config.queuePrefix);
  return { ...checked, redis, queue, handle, refreshHandle, api, refreshQueue };
}

/** Stops the worker once, however many ask; resolves to its exit code. */
function stopWorker(w: Worker, reason: string): Promise<number> {
  w.stopped ??= shutDown(w, reason);
  return w.stopped;
}

async function shutDown(w: Worker, reason: string): Promise<number> {
  const timeoutMs = w.opts.shutdownTimeoutMs;
  w.logger.info({ reason }, 'worker stopping: finishing in-flight jobs');
  await w.admin?.stop();
  // Out of the fleet at once (a process that is stopping takes no new work), but never held
  // up by a Postgres that does not answer: the jobs close meanwhile.
  const [finished] = await Promise.all([
    w.sync?.close(timeoutMs) ?? true,
    w.refresh?.close(),
    w.webhooks?.stop(timeoutMs),
    w.ledger ? settlesWithin(w.ledger.stop(), 5000) : undefined,
    w.events ? settlesWithin(w.events.stop(), 5000) : undefined,
    w.fleet ? settlesWithin(w.fleet.leave(), 2000) : undefined,
  ]);
  await Promise.allSettled([
    settlesWithin(w.queue.close(), 2000),
    settlesWithin(w.refreshQueue.close(), 2000),
    w.api.close(),
    w.handle.close(),
    w.refreshHandle.close(),
  ]);
  w.redis.disconnect();
  w.logger.info({ finished }, finished ? 'worker stopped' : 'worker stopped before in-flight jobs finished');
  return w.tooOld !== undefined ? 3 : w.keyRejected !== undefined ? 2 : finished ? 0 : 1;
}

/**
 * In the fleet before the first job: `migrate` sees this process from now on, and the breaking
 * check after joining closes the gap between the check at start and the join.
 */
async function enterFleet(w: Worker): Promise<FleetMembership> {
  try {
    w.fleet = await joinFleet(
      w.handle.pool,
      thisProcess(w.config, w.opts.admin ? 'worker+admin' : 'worker', w.concurrency),
      {
        onError: (error) =>
          w.logger.warn({ err: error.message }, 'fleet heartbeat failed; retrying at the next beat'),
        onBeat: () => leaveIfTooOld(w),
      },
    );
    const newer = await breakingAhead(w.handle.pool, w.known);
    if (newer !== undefined) throw new CliError(tooOldMessage(packageVersion(), w.known, newer), 3);
  } catch (error) {
    await stopWorker(w, 'could not join the fleet');
    throw error;
  }
  return w.fleet;
}

/**
 * A breaking migration applied under a running fleet: stop taking jobs, finish those in flight,
 * exit 3, and let the orchestrator restart this process on the new release.
 */
async function leaveIfTooOld(w: Worker): Promise<void> {
  if (w.tooOld !== undefined || w.stopped !== undefined) return;
  const newer = await breakingAhead(w.handle.pool, w.known);
  if (newer === undefined) return;
  w.tooOld = tooOldMessage(packageVersion(), w.known, newer);
  w.logger.error({ migration: newer }, w.tooOld);
  w.io.err(`cards-sync: ${w.tooOld}`);
  void stopWorker(w, 'breaking migration').then(() => w.leaveForNewer?.(3));
}

function startSync(w: Worker, fleet: FleetMembership): Promise<SyncWorker> {
  const { config, handle, io } = w;
  return startSyncWorker(
    {
      db: handle.db,
      api: w.api,
      logger: w.logger,
      tokens: w.tokens,
      queue: w.queue,
      redis: w.redis,
      metrics: w.metrics,
      goneAfterNotFound: config.syncGoneAfterNotFound,
      changeEvents: config.changeEvents === 'on',
      bulkBreaker: { maxWipeRatio: config.refreshMaxWipeRatio },
      fleetId: fleet.id,
      liveProcessIds: async () =>
        new Set((await liveFleet(handle.pool)).filter((p) => p.role !== 'admin').map((p) => p.id)),
      // Its own key at fault (jobs/sync/key-rejected.ts): finish, leave the fleet, exit 2 saying why.
      onOwnKeyRejected: (message) => {
        w.keyRejected = message;
        io.err(`cards-sync: ${message}`);
        void stopWorker(w, 'API key rejected').then((code) => w.leaveForNewer?.(code));
      },
    },
    {
      redisUrl: config.redis,
      prefix: config.queuePrefix,
      concurrency: w.concurrency,
      rateLimitPerSec: config.syncRateLimitPerSec,
      apiTimeoutMs: w.apiConfig.timeoutMs,
      maxAgeMs: config.refreshMaxAgeMs,
    },
  );
}

function startRefresh(w: Worker, fleet: FleetMembership): ReturnType<typeof startRefreshWorker> {
  const { config } = w;
  return startRefreshWorker(
    { db: w.refreshHandle.db, logger: w.logger, syncQueue: w.queue, redis: w.redis, fleetId: fleet.id },
    {
      redisUrl: config.redis,
      prefix: config.queuePrefix,
      maxWipeRatio: config.refreshMaxWipeRatio,
      rateLimitPerSec: config.syncRateLimitPerSec,
      plan: refreshPlanSettings(config),
      ...(config.refreshMode === 'continuous'
        ? {
            continuous: {
              budgetPerSec: config.refreshBudgetPerSec!,
              auditShare: config.refreshAuditShare,
              maxAgeMs: config.refreshMaxAgeMs,
            },
          }
        : {}),
    },
  );
}

/** What runs beside the jobs: the ledger's and the change events' upkeep, webhook delivery, the admin server. */
async function startBeside(w: Worker, fleet: FleetMembership): Promise<void> {
  const { config, logger, metrics } = w;
  // The ledger's days ahead and its retention (every worker: the passes take turns).
  w.ledger = startLedgerMaintenance(w.refreshHandle.pool, logger, {
    retentionDays: config.syncRunsRetentionDays,
  });
  w.events = startChangeEventsMaintenance(w.refreshHandle.pool, logger, {
    retentionDays: config.changeEventsRetentionDays,
  });
  // Webhooks: claimed from Postgres, outside the sync queue and the API's rate limit.
  w.webhooks = startWebhookDelivery(config, logger, fleet.id, {
    onAttempt: (endpoint, outcome) => metrics.webhookDeliveries.inc({ endpoint: String(endpoint), outcome }),
    ...(w.opts.webhookSchedule ? { schedule: w.opts.webhookSchedule } : {}),
  });
  if (w.opts.admin) {
    try {
      w.admin = await startAdmin(config, { logger, metrics });
    } catch (error) {
      // A worker asked to serve /metrics and the health routes that cannot is not one to keep
      // running unseen: it finishes what it began and exits 1, saying why.
      await stopWorker(w, 'the admin server could not start');
      throw error;
    }
  }
}

function logStarted(w: Worker, fleet: FleetMembership, nextRefresh: number | undefined): void {
  const { config } = w;
  w.logger.info(
    {
      fleetId: fleet.id,
      concurrency: w.concurrency,
      prefix: config.queuePrefix,
      rateLimitPerSec: config.syncRateLimitPerSec,
      refreshMode: config.refreshMode,
      ...(config.refreshMode === 'continuous'
        ? { refreshBudgetPerSec: config.refreshBudgetPerSec, refreshMaxAge: config.refreshMaxAgeMs / 1000 }
        : { refreshCron: config.refreshCron, refreshTz: config.refreshTz }),
      nextRefresh: nextRefresh ? new Date(nextRefresh).toISOString() : null,
    },
    'worker started',
  );
}

/** Runs until idle (--exit-when-idle) or until stopped; resolves to the exit code. */
async function untilEnd(w: Worker): Promise<number> {
  if (w.opts.exitWhenIdle) {
    const end = await untilIdle(
      { sync: w.queue, refresh: w.refreshQueue, redis: w.redis },
      w.io,
      () => w.stopped !== undefined,
    );
    if (end === 'idle') return stopWorker(w, 'idle');
    if (end === 'paused') {
      await stopWorker(w, 'paused');
      return 1;
    }
    // Stopped meanwhile (a signal, a breaking migration, its own key rejected): stop() ran.
    const code = await w.stopped!;
    return w.tooOld !== undefined ? 3 : code;
  }
  return new Promise<number>((resolve) => {
    w.leaveForNewer = resolve;
  });
}

/** What the refresh's shared plan is made for, from the configuration. */
function refreshPlanSettings(config: Config): RefreshPlanSettings {
  return {
    mode: config.refreshMode,
    budgetPerSec:
      config.refreshMode === 'continuous'
        ? config.refreshBudgetPerSec
        : config.syncRateLimitPerSec > 0
          ? config.syncRateLimitPerSec
          : null,
    maxAgeMs: config.refreshMaxAgeMs,
    auditShare: config.refreshAuditShare,
  };
}
