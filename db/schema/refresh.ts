import { sql } from 'drizzle-orm';
import {
  bigint,
  boolean,
  check,
  doublePrecision,
  index,
  integer,
  jsonb,
  pgTable,
  text,
  uniqueIndex,
} from 'drizzle-orm/pg-core';
import { inList, tz } from './columns.js';

// The refresh: one refresh_runs row per run, and the shared freshness plan.

/** `continuous`: one window of REFRESH_MODE=continuous (jobs/refresh/continuous.ts). */
export const REFRESH_TRIGGERS = ['nightly', 'manual', 'continuous'] as const;
export type RefreshTrigger = (typeof REFRESH_TRIGGERS)[number];

// `empty`: the run matched no subscriber (e.g. `--stale` with everyone fresh); it is not a success.
export const REFRESH_STATUSES = ['running', 'halted', 'completed', 'abandoned', 'empty'] as const;
export type RefreshStatus = (typeof REFRESH_STATUSES)[number];

/** One row per refresh of all (or all stale) known subscribers. */
export const refreshRuns = pgTable(
  'refresh_runs',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    trigger: text('trigger').$type<RefreshTrigger>().notNull(),
    status: text('status').$type<RefreshStatus>().notNull(),
    startedAt: tz('started_at').notNull(),
    /** When the fan-out had enqueued every subscriber. */
    fanoutFinishedAt: tz('fanout_finished_at'),
    finishedAt: tz('finished_at'),
    /** `--stale`: only subscribers whose last success is older than this. */
    staleBefore: tz('stale_before'),
    /** Keyset cursor: the last subscriber id fanned out; a restarted fan-out continues after it. */
    cursor: bigint('cursor', { mode: 'number' }).notNull().default(0),
    /**
     * With `cursor`, the keyset position of a nightly run, which goes in `next_refresh_at` order
     * (never planned first): that subscriber's due time; null while still among the never planned.
     */
    cursorDue: tz('cursor_due'),
    subscribersTotal: integer('subscribers_total').notNull().default(0),
    enqueued: integer('enqueued').notNull().default(0),
    alreadyQueued: integer('already_queued').notNull().default(0),
    succeeded: integer('succeeded').notNull().default(0),
    failed: integer('failed').notNull().default(0),
    notFound: integer('not_found').notNull().default(0),
    invalid: integer('invalid').notNull().default(0),
    /** Cards stored for the first time. (Runs closed before migration 0023 count restored ones here too.) */
    cardsAdded: integer('cards_added').notNull().default(0),
    cardsRemoved: integer('cards_removed').notNull().default(0),
    /** Cards that had vanished upstream and were listed again (migration 0023). */
    cardsRestored: integer('cards_restored').notNull().default(0),
    /** Succeeded syncs whose answer removed every active card of the subscriber. */
    wipedSubscribers: integer('wiped_subscribers').notNull().default(0),
    /** The newest `sync_runs.id` when the run began: every row of the run has a greater one. */
    priorSyncRunId: bigint('prior_sync_run_id', { mode: 'number' }).notNull().default(0),
    /** The last `sync_runs.id` already tallied into the counts above. */
    lastSyncRunId: bigint('last_sync_run_id', { mode: 'number' }).notNull().default(0),
    haltedReason: text('halted_reason'),
    /** Set when an operator resumed a halted run: the breaker stays off for the rest of it. */
    breakerOverridden: boolean('breaker_overridden').notNull().default(false),
    jobId: text('job_id'),
    /** Subscribers the run set out to sync, counted when its fan-out began. */
    plannedSubscribers: integer('planned_subscribers'),
    /** `SYNC_RATE_LIMIT_PER_SEC` when the run began; null when there was none. */
    rateBudgetPerSec: integer('rate_budget_per_sec'),
    /** When the run would end at that rate: its plan, made at the start. */
    expectedFinishAt: tz('expected_finish_at'),
    /** When the next scheduled refresh was due as the run began. */
    nextRefreshAt: tz('next_refresh_at'),
  },
  (t) => [
    check('refresh_runs_trigger_valid', sql`${t.trigger} in (${inList(REFRESH_TRIGGERS)})`),
    check('refresh_runs_status_valid', sql`${t.status} in (${inList(REFRESH_STATUSES)})`),
    // At most one refresh in progress (running or halted) at any time.
    uniqueIndex('refresh_runs_one_in_progress_idx')
      .on(sql`(true)`)
      .where(sql`${t.status} in ('running', 'halted')`),
    index('refresh_runs_started_at_idx').on(t.startedAt),
  ],
);

/**
 * The refresh's shared plan (one row): the threshold every worker schedules with, the population
 * prior, whether the budget keeps REFRESH_MAX_AGE, and the continuous refresh's token bucket.
 * Recomputed by the refresh every few minutes; workers read it, and a restart loses nothing.
 */
export const refreshPolicy = pgTable(
  'refresh_policy',
  {
    id: integer('id').primaryKey().default(1),
    mode: text('mode').notNull(),
    /** The benefit threshold μ in days (src/freshness/schedule.ts); null: everyone at the max age. */
    thresholdDays: doublePrecision('threshold_days'),
    priorRatePerDay: doublePrecision('prior_rate_per_day').notNull(),
    /** The population's mixture of rates (src/freshness/mixture.ts); null until enough are observed. */
    priorMixture: jsonb('prior_mixture').$type<{ ratesPerDay: number[]; weights: number[] }>(),
    maxAgeSeconds: integer('max_age_seconds').notNull(),
    budgetPerSec: doublePrecision('budget_per_sec'),
    auditShare: doublePrecision('audit_share').notNull(),
    subscribers: bigint('subscribers', { mode: 'number' }).notNull().default(0),
    keepsMaxAge: boolean('keeps_max_age').notNull(),
    /** Syncs a second that syncing everyone once per max age takes. */
    maxAgeNeedsPerSec: doublePrecision('max_age_needs_per_sec').notNull(),
    /** The longest interval the plan gives anyone, days, when shorter than the max age's: coverage. */
    coverageDays: doublePrecision('coverage_days'),
    /** Shares of the schedule's budget: the plan's (threshold and max age) and coverage's. */
    spendPlan: doublePrecision('spend_plan'),
    spendCoverage: doublePrecision('spend_coverage'),
    /** How the plan acts on the audit: `none`, `round-robin` or `estimate-high` (db/refresh/policy.ts says when). */
    auditAction: text('audit_action'),
    /**
     * The share of the plan's own syncs expected to find the cards changed, were its rates right;
     * between plans the refresh holds its syncs to it (docs/refresh.md). Null in a plan stored before it.
     */
    expectedChangedShare: doublePrecision('expected_changed_share'),
    /**
     * Since when the plans in force have expected about the same share (src/freshness
     * `expectationSince`): the refresh holds its own syncs since then to the expectation. Null in a
     * plan stored before it, read as its `computed_at`.
     */
    expectedSince: tz('expected_since'),
    /** The share the plans of that expectation began at; null in a plan stored before it. */
    expectedFrom: doublePrecision('expected_from'),
    /**
     * The shortest interval the plan gives a wallet changing at most twice a max age, days: the
     * scheduled budget's mean interval over src/freshness `MOST_SYNCS_OF_MEAN` (a faster wallet's is
     * shorter in proportion). Null in a plan stored before it, read as none.
     */
    minIntervalDays: doublePrecision('min_interval_days'),
    /**
     * When a release that writes `expected_since`, `expected_from` and `min_interval_days` last wrote
     * the row: equal to `computed_at` then. Later than it, or null, an earlier release wrote the plan
     * since and left the three as they were: they are read as unknown (db/refresh/policy.ts `readPolicy`).
     */
    stampedAt: tz('stamped_at'),
    computedAt: tz('computed_at').notNull(),
  },
  (t) => [check('refresh_policy_one_row', sql`${t.id} = 1`)],
);
