import { DelayedError, type Job, type Queue, UnrecoverableError, Worker } from 'bullmq';
import { isConnectionError, rootCause } from '../../db/errors.js';
import { ping } from '../../db/server.js';
import type { Metrics } from '../../src/metrics/index.js';
import { redactExcerpt } from '../../src/shared/index.js';
import {
  parseEmail,
  type SyncDeps,
  type SyncResult,
  syncSubscriber,
  TargetError,
} from '../../src/sync/index.js';
import type { RedisClient } from '../redis.js';
import {
  type BulkBreakerOptions,
  bulkPauseKey,
  countBulkAnswer,
  holdBulkJob,
  isBulkJob,
} from './bulk-breaker.js';
import { holdWorkers } from './hold.js';
import { NEWER_PAYLOAD_HOLD_MS, newerPayload } from './job.js';
import { traceJobResult, traceJobStart } from './job-trace.js';
import { type KeyRejectionDeps, keyRejectionHandler } from './key-rejected.js';
import { isOpsJob, opsServedCounter } from './lanes.js';
import { SYNC_PAYLOAD_VERSION, type SyncJobData, type SyncJobResult, syncJobSchema } from './queue.js';
import { countOutcome } from './refresh-tally.js';

/** Raised for a transient failure: BullMQ retries it with backoff. */
class TransientSyncError extends Error {
  override readonly name = 'TransientSyncError';
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
  }
}

export interface ProcessorDeps
  extends SyncDeps,
    Pick<KeyRejectionDeps, 'fleetId' | 'liveProcessIds' | 'onOwnKeyRejected'> {
  queue: Queue<SyncJobData, SyncJobResult>;
  redis: RedisClient;
  /** Where outcomes, API latencies and card counts are observed, if anywhere. */
  metrics?: Metrics;
  /** The mass-removal breaker over bulk work (jobs/sync/bulk-breaker.ts). */
  bulkBreaker?: BulkBreakerOptions;
}

/** How long a bulk job held by the paused bulk lane waits before it looks again (resume sends it on at once). */
const BULK_HOLD_MS = 15 * 60_000;

/** Whether the bulk lane is paused, asked of Redis at most every 250 ms per process. */
function bulkPausedFlag(redis: RedisClient, prefix: string) {
  let known: { paused: boolean; at: number } | undefined;
  return {
    async paused(): Promise<boolean> {
      if (known === undefined || Date.now() - known.at > 250) {
        known = { paused: (await redis.exists(bulkPauseKey(prefix))) > 0, at: Date.now() };
      }
      return known.paused;
    },
    tripped(): void {
      known = { paused: true, at: Date.now() };
    },
    /** Asks Redis now: a job is held only on a fresh answer, never on one `resume` has made stale. */
    async confirmed(): Promise<boolean> {
      known = { paused: (await redis.exists(bulkPauseKey(prefix))) > 0, at: Date.now() };
      return known.paused;
    },
  };
}

/** Counts a bulk job's answer for the breaker; logs the one line that says it tripped. */
async function countForBulk(deps: ProcessorDeps, result: SyncResult, onTrip: () => void): Promise<void> {
  const c = result.counts;
  const answered =
    result.status === 'succeeded' || result.status === 'superseded' || result.status === 'not_found';
  if (!answered) return;
  const wiped = result.status === 'not_found' ? c.removed > 0 : c.removed > 0 && c.cardsSeen === 0;
  try {
    const pause = await countBulkAnswer(
      deps.redis,
      deps.queue.opts.prefix ?? 'bull',
      wiped,
      deps.bulkBreaker,
    );
    if (pause) {
      onTrip();
      deps.logger.error(
        { answered: pause.answered, wiped: pause.wiped },
        `bulk lane PAUSED by the mass-removal breaker: ${pause.reason}; single re-syncs and the refresh go on`,
      );
    }
  } catch (error) {
    deps.logger.warn({ err: { message: (error as Error).message } }, 'could not count a bulk answer');
  }
}

function observe(metrics: Metrics | undefined, result: SyncResult): void {
  if (!metrics) return;
  metrics.syncOutcomes.inc({ status: result.status });
  metrics.jobDuration.observe({ status: result.status }, result.durationMs / 1000);
  metrics.apiRequests.inc({ code: result.api.code });
  metrics.apiLatency.observe({ code: result.api.code }, result.api.durationMs / 1000);
  const c = result.counts;
  if (c.inserted) metrics.cards.inc({ change: 'inserted' }, c.inserted);
  if (c.updated) metrics.cards.inc({ change: 'updated' }, c.updated);
  if (c.removed) metrics.cards.inc({ change: 'removed' }, c.removed);
  if (c.restored) metrics.cards.inc({ change: 'restored' }, c.restored);
}

/** Counts a refresh job's final outcome (not a retry that will run again, nor a 429 or 401). */
async function countForRefresh(
  deps: ProcessorDeps,
  job: Job<SyncJobData, SyncJobResult>,
  runId: number,
  result: SyncResult,
) {
  const lastAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
  const c = result.counts;
  const base = { wiped: false, added: 0, removed: 0, restored: 0 };
  let outcome: Parameters<typeof countOutcome>[3] | undefined;
  if (result.status === 'succeeded' || result.status === 'superseded') {
    outcome = {
      kind: 'succeeded',
      wiped: c.removed > 0 && c.cardsSeen === 0,
      added: c.inserted,
      removed: c.removed,
      restored: c.restored,
    };
  } else if (result.status === 'not_found') {
    // SYNC_GONE_AFTER_NOT_FOUND took every active card: wiped, as by an empty answer.
    outcome = { kind: 'notFound', wiped: c.removed > 0, added: 0, removed: c.removed, restored: 0 };
  } else if (result.status === 'invalid_response') outcome = { kind: 'invalid', ...base };
  else if (result.status === 'failed' && (!result.retryable || lastAttempt))
    outcome = { kind: 'failed', ...base };
  if (outcome === undefined) return;
  await countOutcome(deps.redis, deps.queue.opts.prefix ?? 'bull', runId, outcome).catch((error: Error) => {
    deps.logger.warn(
      { refreshRunId: runId, err: { message: error.message } },
      'could not count a refresh outcome',
    );
  });
}

/** Postgres is away: every worker waits a few seconds and the job goes back without using an attempt. */
async function holdForDatabase(deps: ProcessorDeps, code: string | undefined): Promise<never> {
  deps.logger.warn(
    { errorCode: code },
    `Postgres is unreachable; holding every worker ${DB_HOLD_MS} ms, no attempt used`,
  );
  await holdWorkers(deps.queue, deps.redis, DB_HOLD_MS, 'database');
  throw Worker.RateLimitError();
}

/**
 * The payload with its e-mail held to enqueue's rule (src/sync/targets.ts), which a job queued by an
 * earlier release, or added to the queue by other means, never met: one that breaks it fails for
 * good, naming the rule it breaks and never the address (failed jobs are kept in Redis and shown on
 * the dashboard). Like any payload that is not a sync request, it writes no `sync_runs` row.
 */
function withCheckedEmail(data: SyncJobData): SyncJobData {
  if (!('email' in data.target)) return data;
  try {
    return { ...data, target: { email: parseEmail(data.target.email) } };
  } catch (error) {
    if (!(error instanceof TargetError)) throw error;
    throw new UnrecoverableError(
      `the job's e-mail is not one enqueue accepts: ${error.message}; correct it and enqueue it again with cards-sync enqueue`,
    );
  }
}

/** How long a Postgres outage holds the workers before they try again, ms. */
const DB_HOLD_MS = 5000;

/**
 * The sync processor: one job = one subscriber. Permanent outcomes fail at once
 * (`UnrecoverableError`) after their `sync_runs` row is written; transient ones throw so that
 * `attempts`/`backoff` retry; a 429 rate-limits every worker without using an attempt; a rejected
 * key stops this worker or pauses the queue (jobs/sync/key-rejected.ts) and puts the job back, again
 * without using an attempt.
 */
export function createSyncProcessor(deps: ProcessorDeps) {
  const keys = keyRejectionHandler(deps);
  const opsServed = opsServedCounter(deps.redis, deps.queue.opts.prefix ?? 'bull');
  const bulkLane = bulkPausedFlag(deps.redis, deps.queue.opts.prefix ?? 'bull');
  // After Postgres was found away, each job asks it first, until it answers: a sync that cannot be
  // written must not spend a request of the rate-limited API. While Postgres is healthy, no probe.
  let dbSuspect = false;
  const hold = async (code: string | undefined): Promise<never> => {
    dbSuspect = true;
    return holdForDatabase(deps, code);
  };
  const process = async (
    job: Job<SyncJobData, SyncJobResult>,
    token?: string,
    signal?: AbortSignal,
  ): Promise<SyncJobResult> => {
    const newer = newerPayload(job.data, SYNC_PAYLOAD_VERSION);
    if (newer !== undefined && token !== undefined) {
      // Written by a newer release: handed back for a newer worker, with no attempt used.
      deps.logger.warn(
        { jobId: job.id, payloadVersion: newer, knownVersion: SYNC_PAYLOAD_VERSION },
        'a job from a newer release: handed back for a newer worker (no attempt used)',
      );
      await job.moveToDelayed(Date.now() + NEWER_PAYLOAD_HOLD_MS, token);
      throw new DelayedError();
    }
    const parsed = syncJobSchema.safeParse(job.data);
    if (!parsed.success) {
      throw new UnrecoverableError(
        'the job payload is not a valid sync request; enqueue it again with cards-sync enqueue',
      );
    }
    const data = withCheckedEmail(parsed.data);
    traceJobStart(job, data);
    if (keys.stopping && token !== undefined) return keys.handBack(job, token);
    const bulk = isBulkJob(job);
    if (
      bulk &&
      token !== undefined &&
      job.id !== undefined &&
      (await bulkLane.paused()) &&
      (await bulkLane.confirmed())
    ) {
      // Held, not failed: no attempt used, no request spent; `resume` sends it on.
      await holdBulkJob(deps.redis, deps.queue.opts.prefix ?? 'bull', job.id);
      await job.moveToDelayed(Date.now() + BULK_HOLD_MS, token);
      throw new DelayedError();
    }
    if (isOpsJob(data)) {
      // A slot went to ops work: the running refresh is owed its share (jobs/sync/lanes.ts).
      opsServed.add();
    }
    if (dbSuspect) {
      try {
        await ping(deps.db);
        dbSuspect = false;
      } catch (error) {
        await hold(rootCause(error).code);
      }
    }
    let result: Awaited<ReturnType<typeof syncSubscriber>>;
    // Set once the 429's rate limit is in place (done before the attempt is recorded).
    let limited = false;
    try {
      result = await syncSubscriber(deps, {
        target: data.target,
        trigger: data.trigger,
        ...(job.id !== undefined ? { jobId: job.id } : {}),
        ...(data.refreshRunId !== undefined ? { refreshRunId: data.refreshRunId } : {}),
        ...(signal ? { signal } : {}),
        attempt: job.attemptsMade + 1,
        onRateLimited: async (ms) => {
          await holdWorkers(deps.queue, deps.redis, ms, 'api_429');
          limited = true;
        },
      });
    } catch (error) {
      // The database could not even record the attempt. Only the root cause travels on: the
      // wrapper's message quotes the query's parameters.
      const root = rootCause(error);
      if (isConnectionError(root.code)) await hold(root.code);
      throw new TransientSyncError(`db_error: ${redactExcerpt(root.message, [], 200)}`, 'db_error');
    }
    observe(deps.metrics, result);
    traceJobResult(result);
    if (result.errorCode === 'db_unavailable') await hold(result.errorCode);
    if (data.refreshRunId !== undefined) await countForRefresh(deps, job, data.refreshRunId, result);
    if (bulk) await countForBulk(deps, result, () => bulkLane.tripped());
    switch (result.status) {
      case 'superseded':
      case 'succeeded':
        keys.worked();
        return {
          status: result.status,
          subscriberId: result.subscriberId,
          syncRunId: result.syncRunId,
          cardsSeen: result.counts.cardsSeen,
          inserted: result.counts.inserted,
          updated: result.counts.updated,
          removed: result.counts.removed,
          restored: result.counts.restored,
        };
      case 'rate_limited':
        if (!limited) await holdWorkers(deps.queue, deps.redis, result.retryAfterMs ?? 1000, 'api_429');
        throw Worker.RateLimitError();
      case 'auth_rejected':
        return keys.rejected(job, token, Number(result.api.code), result.errorMessage ?? 'API key rejected');
      default:
        if (result.retryable)
          throw new TransientSyncError(
            `${result.errorCode}: ${result.errorMessage}`,
            result.errorCode ?? 'failed',
          );
        throw new UnrecoverableError(`${result.status} (${result.errorCode}): ${result.errorMessage}`);
    }
  };
  // Counts not yet sent go with the worker's close, not after it (a timer would send them late).
  return Object.assign(process, { flush: () => opsServed.flush() });
}
