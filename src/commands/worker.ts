import { breakingAhead, tooOldMessage } from '../../db/breaking.js';
import { createDb } from '../../db/client.js';
import { knownMigration } from '../../db/migrate.js';
import { createSyncQueue } from '../../jobs/queue.js';
import { createRedis, settlesWithin } from '../../jobs/redis.js';
import { createRefreshQueue, registerRefreshMode, startRefreshWorker } from '../../jobs/refresh.js';
import type { RefreshPlanSettings } from '../../jobs/refresh-policy.js';
import { type SyncWorker, startSyncWorker } from '../../jobs/worker.js';
import { createApiClient } from '../api/client.js';
import { type Config, requireApi } from '../config/index.js';
import { requireCardTokens } from '../config/tokens.js';
import { CliError } from '../errors.js';
import type { RetrySchedule } from '../events/backoff.js';
import { startWebhookDelivery, type WebhookDelivery } from '../events/delivery-worker.js';
import { startChangeEventsMaintenance } from '../events/maintenance.js';
import { type FleetMembership, joinFleet, liveFleet } from '../fleet/registry.js';
import { thisProcess } from '../fleet/this-process.js';
import { startLedgerMaintenance } from '../ledger/maintenance.js';
import { createLogger } from '../logger.js';
import { createMetrics } from '../metrics.js';
import { onShutdown } from '../shutdown.js';
import { endpointProblems, tracingWanted } from '../tracing/wanted.js';
import { packageVersion } from '../version.js';
import { ensureRedis, type Io } from './common.js';
import { startAdmin } from './serve.js';
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
   * Default `DEFAULT_SCHEDULE` (src/events/backoff.ts): about a day of retries, 5 s doubling.
   */
  webhookSchedule?: RetrySchedule;
}

/** `cards-sync worker`: processes sync jobs until signalled (or until idle with --exit-when-idle). */
export async function cmdWorker(config: Config, io: Io, opts: WorkerCliOptions): Promise<number> {
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
  const api = createApiClient(apiConfig, { connections: concurrency });
  const refreshQueue = createRefreshQueue(redis, config.queuePrefix);

  // Signals are handled before any job can start, so that a SIGTERM always finishes what runs.
  let sync: SyncWorker | undefined;
  let refresh: Awaited<ReturnType<typeof startRefreshWorker>> | undefined;
  let admin: Awaited<ReturnType<typeof startAdmin>> | undefined;
  let fleet: FleetMembership | undefined;
  let ledger: ReturnType<typeof startLedgerMaintenance> | undefined;
  let events: ReturnType<typeof startChangeEventsMaintenance> | undefined;
  let webhooks: WebhookDelivery | undefined;
  let stopped: Promise<number> | undefined;
  /** Set when a breaking migration this release does not know was applied while it ran. */
  let tooOld: string | undefined;
  /** Set when the API rejected this process's key while another key works for the fleet. */
  let keyRejected: string | undefined;
  let leaveForNewer: ((code: number) => void) | undefined;
  const stop = (reason: string) => {
    stopped ??= (async () => {
      logger.info({ reason }, 'worker stopping: finishing in-flight jobs');
      await admin?.stop();
      // Out of the fleet at once (a process that is stopping takes no new work), but never held
      // up by a Postgres that does not answer: the jobs close meanwhile.
      const [finished] = await Promise.all([
        sync?.close(opts.shutdownTimeoutMs) ?? true,
        refresh?.close(),
        webhooks?.stop(opts.shutdownTimeoutMs),
        ledger ? settlesWithin(ledger.stop(), 5000) : undefined,
        events ? settlesWithin(events.stop(), 5000) : undefined,
        fleet ? settlesWithin(fleet.leave(), 2000) : undefined,
      ]);
      await Promise.allSettled([
        settlesWithin(queue.close(), 2000),
        settlesWithin(refreshQueue.close(), 2000),
        api.close(),
        handle.close(),
        refreshHandle.close(),
      ]);
      redis.disconnect();
      logger.info(
        { finished },
        finished ? 'worker stopped' : 'worker stopped before in-flight jobs finished',
      );
      return tooOld !== undefined ? 3 : keyRejected !== undefined ? 2 : finished ? 0 : 1;
    })();
    return stopped;
  };
  onShutdown((signal) => stop(signal), opts.shutdownTimeoutMs + 5000);

  // In the fleet before the first job: `migrate` sees this process from now on, and the breaking
  // check after joining closes the gap between the check at start and the join.
  try {
    fleet = await joinFleet(
      handle.db.$client,
      thisProcess(config, opts.admin ? 'worker+admin' : 'worker', concurrency),
      {
        onError: (error) =>
          logger.warn({ err: error.message }, 'fleet heartbeat failed; retrying at the next beat'),
        // A breaking migration applied under a running fleet: stop taking jobs, finish those in
        // flight, exit 3, and let the orchestrator restart this process on the new release.
        onBeat: async () => {
          if (tooOld !== undefined || stopped !== undefined) return;
          const newer = await breakingAhead(handle.pool, known);
          if (newer === undefined) return;
          tooOld = tooOldMessage(packageVersion(), known, newer);
          logger.error({ migration: newer }, tooOld);
          io.err(`cards-sync: ${tooOld}`);
          void stop('breaking migration').then(() => leaveForNewer?.(3));
        },
      },
    );
    const newer = await breakingAhead(handle.pool, known);
    if (newer !== undefined) throw new CliError(tooOldMessage(packageVersion(), known, newer), 3);
  } catch (error) {
    await stop('could not join the fleet');
    throw error;
  }
  if (stopped !== undefined) {
    // Signalled while joining: stop() ran without a row to remove.
    await settlesWithin(fleet.leave(), 2000);
    return stopped;
  }

  const goneAfterNotFound = config.syncGoneAfterNotFound;
  sync = await startSyncWorker(
    {
      db: handle.db,
      api,
      logger,
      tokens,
      queue,
      redis,
      metrics,
      goneAfterNotFound,
      changeEvents: config.changeEvents === 'on',
      bulkBreaker: { maxWipeRatio: config.refreshMaxWipeRatio },
      fleetId: fleet.id,
      liveProcessIds: async () =>
        new Set((await liveFleet(handle.pool)).filter((p) => p.role !== 'admin').map((p) => p.id)),
      // Its own key at fault (jobs/key-rejected.ts): finish, leave the fleet, exit 2 saying why.
      onOwnKeyRejected: (message) => {
        keyRejected = message;
        io.err(`cards-sync: ${message}`);
        void stop('API key rejected').then((code) => leaveForNewer?.(code));
      },
    },
    {
      redisUrl: config.redis,
      prefix: config.queuePrefix,
      concurrency,
      rateLimitPerSec: config.syncRateLimitPerSec,
      apiTimeoutMs: apiConfig.timeoutMs,
      maxAgeMs: config.refreshMaxAgeMs,
    },
  );
  if (stopped !== undefined) {
    await sync.close(opts.shutdownTimeoutMs);
    return stopped;
  }
  refresh = await startRefreshWorker(
    { db: refreshHandle.db, logger, syncQueue: queue, redis, fleetId: fleet.id },
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
  if (stopped !== undefined) {
    await refresh.close();
    return stopped;
  }
  // The ledger's days ahead and its retention (every worker: the passes take turns).
  ledger = startLedgerMaintenance(refreshHandle.pool, logger, {
    retentionDays: config.syncRunsRetentionDays,
  });
  events = startChangeEventsMaintenance(refreshHandle.pool, logger, {
    retentionDays: config.changeEventsRetentionDays,
  });
  // Webhooks: claimed from Postgres, outside the sync queue and the API's rate limit.
  webhooks = startWebhookDelivery(config, logger, fleet.id, {
    onAttempt: (endpoint, outcome) => metrics.webhookDeliveries.inc({ endpoint: String(endpoint), outcome }),
    ...(opts.webhookSchedule ? { schedule: opts.webhookSchedule } : {}),
  });
  if (opts.admin) {
    try {
      admin = await startAdmin(config, { logger, metrics });
    } catch (error) {
      // A worker asked to serve /metrics and the health routes that cannot is not one to keep
      // running unseen: it finishes what it began and exits 1, saying why.
      await stop('the admin server could not start');
      throw error;
    }
  }
  const nextRefresh = await registerRefreshMode(refreshQueue, config.refreshMode, {
    pattern: config.refreshCron,
    tz: config.refreshTz,
  });
  logger.info(
    {
      fleetId: fleet.id,
      concurrency,
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

  if (opts.exitWhenIdle) {
    const end = await untilIdle(
      { sync: queue, refresh: refreshQueue, redis },
      io,
      () => stopped !== undefined,
    );
    if (end === 'idle') return stop('idle');
    if (end === 'paused') {
      await stop('paused');
      return 1;
    }
    // Stopped meanwhile (a signal, a breaking migration, its own key rejected): stop() ran.
    const code = await stopped!;
    return tooOld !== undefined ? 3 : code;
  }
  return new Promise<number>((resolve) => {
    leaveForNewer = resolve;
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
