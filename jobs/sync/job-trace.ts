import type { Job } from 'bullmq';
import type { SyncResult } from '../../src/sync/index.js';
import { tracing } from '../../src/tracing/index.js';
import { isBulkJob } from './bulk-breaker.js';
import type { SyncJobData, SyncJobResult } from './queue.js';

// What a job's span says about the sync (BullMQ's `process` span, the active one while the
// processor runs). A subscriber is named by its id, or by the keyed hash job ids carry for an
// e-mail (jobs/sync/job-ids.ts): never by the address.

/** The lane a job was taken from (jobs/sync/lanes.ts). */
function laneOf(job: Job<SyncJobData, SyncJobResult>): string {
  if (isBulkJob(job)) return 'bulk';
  return job.data.refreshRunId !== undefined && job.data.promoted !== true ? 'refresh' : 'ops';
}

/** `id:42` or `email:<hash>`: the dedup key at the head of every sync job's id. */
function subscriberKey(jobId: string | undefined): string | undefined {
  const m = jobId === undefined ? null : /^(id:\d+|email:[A-Za-z0-9_-]+)/.exec(jobId);
  return m?.[1];
}

/** Names the job's span and records the job's wait in the queue (the limiter's included) as a child. */
export function traceJobStart(job: Job<SyncJobData, SyncJobResult>, data: SyncJobData): void {
  const t = tracing();
  t.annotate({
    'cards_sync.subscriber': subscriberKey(job.id),
    'cards_sync.subscriber_id': 'subscriberId' in data.target ? data.target.subscriberId : undefined,
    'cards_sync.lane': laneOf(job),
    'cards_sync.trigger': data.trigger,
    'cards_sync.refresh_run_id': data.refreshRunId,
    'cards_sync.attempt': job.attemptsMade + 1,
  });
  // A first attempt waited from its enqueue; a retry's wait is its backoff, shown by BullMQ's span.
  // An attribute, not a span: a span for it cost every kept sync a seventh of what tracing costs
  // (docs/tracing.md, "What it costs").
  if (job.attemptsMade === 0 && job.processedOn !== undefined) {
    t.annotate({
      'cards_sync.queue_wait_ms': Math.max(0, job.processedOn - job.timestamp - (job.delay ?? 0)),
    });
  }
}

/** The sync's outcome on the job's span. */
export function traceJobResult(result: SyncResult): void {
  const c = result.counts;
  tracing().annotate({
    'cards_sync.outcome': result.status,
    'cards_sync.error_code': result.errorCode,
    'cards_sync.subscriber_id': result.subscriberId ?? undefined,
    'cards_sync.api.code': result.api.code,
    'cards_sync.cards_seen': c.cardsSeen,
    'cards_sync.cards_changed': c.inserted + c.updated + c.removed + c.restored,
    'cards_sync.retryable': result.retryable,
  });
}
