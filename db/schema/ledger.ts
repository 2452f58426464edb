import { sql } from 'drizzle-orm';
import { bigint, check, index, integer, pgTable, text } from 'drizzle-orm/pg-core';
import { inList, tz } from './columns.js';

// The ledger (docs/analytics.md): one sync_runs row per sync attempt, partitioned by day (migration 0019).

/** `refresh`: chosen by the continuous refresh; `audit`: drawn uniformly at random to measure staleness. */
export const SYNC_TRIGGERS = ['manual', 'nightly', 'api', 'cli', 'refresh', 'audit'] as const;
export type SyncTrigger = (typeof SYNC_TRIGGERS)[number];

export const SYNC_STATUSES = [
  'succeeded',
  'not_found',
  'invalid_response',
  'failed',
  'auth_rejected',
  'rate_limited',
  // A newer answer was already applied while this one was in flight: nothing written.
  'superseded',
] as const;
export type SyncStatus = (typeof SYNC_STATUSES)[number];

/**
 * One row per sync attempt, whatever its outcome. Partitioned by `started_at`, one partition per
 * UTC day (db/ledger/partitions.ts, migration 0019), which drizzle cannot express: retention drops
 * whole partitions. A partitioned table's primary key must hold the partition key, so `id` has
 * none: its identity sequence alone hands ids out (GENERATED ALWAYS), and nothing looks a run up
 * by `id` alone.
 */
export const syncRuns = pgTable(
  'sync_runs',
  {
    id: bigint('id', { mode: 'number' }).notNull().generatedAlwaysAsIdentity(),
    subscriberId: bigint('subscriber_id', { mode: 'number' }),
    email: text('email'),
    trigger: text('trigger').$type<SyncTrigger>().notNull(),
    jobId: text('job_id'),
    refreshRunId: bigint('refresh_run_id', { mode: 'number' }),
    startedAt: tz('started_at').notNull(),
    finishedAt: tz('finished_at').notNull(),
    status: text('status').$type<SyncStatus>().notNull(),
    cardsSeen: integer('cards_seen').notNull().default(0),
    inserted: integer('inserted').notNull().default(0),
    updated: integer('updated').notNull().default(0),
    unchanged: integer('unchanged').notNull().default(0),
    removed: integer('removed').notNull().default(0),
    restored: integer('restored').notNull().default(0),
    errorCode: text('error_code'),
    /** Redacted: never a token, key or card number. */
    errorMessage: text('error_message'),
  },
  (t) => [
    check('sync_runs_trigger_valid', sql`${t.trigger} in (${inList(SYNC_TRIGGERS)})`),
    check('sync_runs_status_valid', sql`${t.status} in (${inList(SYNC_STATUSES)})`),
    index('sync_runs_subscriber_started_idx').on(t.subscriberId, t.startedAt),
    // A partition is written in time and id order and never deleted from, so a BRIN of a few
    // pages answers ranges of either (status's last 24 hours, a refresh run's ids) where a B-tree
    // cost every run 66 bytes of WAL and 24 of disk per index.
    index('sync_runs_started_id_idx')
      .using('brin', t.startedAt, t.id)
      .with({ autosummarize: true, pages_per_range: 16 }),
    // The audit's samples, newest first (status and /metrics read the last max age of them).
    index('sync_runs_audit_idx').on(t.startedAt).where(sql`${t.trigger} = 'audit'`),
    // No index on refresh_run_id: it cost every sync 76 bytes of WAL for one query a run (its
    // close), which finds the run's rows by id instead (refresh_runs.prior_sync_run_id).
  ],
);
