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
  real,
  text,
  timestamp,
  uniqueIndex,
} from 'drizzle-orm/pg-core';

// Table and column names are public (DESIGN §4): analysts and their scripts query them.

const tz = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

/** Masked shape only: a full card number can never be stored, whatever the code above does. */
export const MASKED_BIN_SQL = '^[0-9]{4}-[xX*]{4}-[xX*]{4}-[0-9]{4}$';

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
 * `conflict`: the subscriber's answer listed a card another subscriber holds as active; the card
 * stayed with its holder (see {@link cardConflicts}). It changes no column.
 */
export const CHANGE_KINDS = ['added', 'updated', 'removed', 'restored', 'conflict'] as const;
export type ChangeKind = (typeof CHANGE_KINDS)[number];

const inList = (values: readonly string[]) => sql.raw(values.map((v) => `'${v}'`).join(', '));

/** One row per card ever seen. */
export const savedCards = pgTable(
  'saved_cards',
  {
    id: bigint('id', { mode: 'number' }).primaryKey(),
    subscriberId: bigint('subscriber_id', { mode: 'number' }).notNull(),
    /**
     * With `CARD_TOKEN_ENCRYPTION=on`, the token sealed with AES-256-GCM (`ct1:<key id>:…`, see
     * src/tokens/); the token itself only for rows written with encryption off.
     */
    cardToken: text('card_token').notNull(),
    /** HMAC-SHA-256 of the token under a key derived from the sealing key; null for a plain token. */
    cardTokenFingerprint: text('card_token_fingerprint'),
    binNumber: text('bin_number').notNull(),
    cardFamily: text('card_family').notNull(),
    cardBankCode: bigint('card_bank_code', { mode: 'number' }).notNull(),
    cardBankName: text('card_bank_name').notNull(),
    companyId: bigint('company_id', { mode: 'number' }).notNull(),
    createDate: tz('create_date').notNull(),
    firstSeenAt: tz('first_seen_at').notNull(),
    lastSeenAt: tz('last_seen_at').notNull(),
    /** Last content change. */
    updatedAt: tz('updated_at').notNull(),
    /** Null while the card is present upstream. */
    removedAt: tz('removed_at'),
    /**
     * The id of its `added` history row, taken from the history's sequence when the card was first
     * stored: the `saved_card_changes` view makes that row from this one. Null for cards stored
     * before migration 0021, whose `added` row is written out in `saved_card_change_log`.
     */
    addedChangeId: bigint('added_change_id', { mode: 'number' }),
    /** The sync run that first stored it (its `added` row's `sync_run_id`). */
    addedSyncRunId: bigint('added_sync_run_id', { mode: 'number' }),
    /** Whom it was first stored for, once it has moved to another subscriber; null until then. */
    addedSubscriberId: bigint('added_subscriber_id', { mode: 'number' }),
  },
  (t) => [
    check('saved_cards_bin_number_masked', sql`${t.binNumber} ~ ${sql.raw(`'${MASKED_BIN_SQL}'`)}`),
    // A subscriber's cards, active or not (the sync, the wallet as of a time). Every index here
    // costs each card written a B-tree entry (66 bytes of WAL): migration 0020 dropped those no query
    // of the product used (active cards by subscriber, which this one serves; bank code, company,
    // create_date, which analysts' reports group by rather than look up).
    index('saved_cards_subscriber_id_idx').on(t.subscriberId),
    // Cards that moved, by whom they were first stored for: their 'added' history rows (0021).
    index('saved_cards_added_subscriber_idx')
      .on(t.addedSubscriberId)
      .where(sql`${t.addedSubscriberId} is not null`),
  ],
);

/** One row per known subscriber. */
export const subscribers = pgTable(
  'subscribers',
  {
    subscriberId: bigint('subscriber_id', { mode: 'number' }).primaryKey(),
    email: text('email'),
    lastSyncedAt: tz('last_synced_at'),
    lastSuccessAt: tz('last_success_at'),
    lastStatus: text('last_status'),
    lastError: text('last_error'),
    consecutiveFailures: integer('consecutive_failures').notNull().default(0),
    activeCards: integer('active_cards').notNull().default(0),
    /**
     * `not_found` answers since the last success, which sets it back to 0; other failures leave it
     * as it is. A retried job counts once, and a 404 fetched before a success already applied not at all.
     */
    consecutiveNotFound: integer('consecutive_not_found').notNull().default(0),
    /**
     * When its active cards were marked removed after `SYNC_GONE_AFTER_NOT_FOUND` not-found answers
     * in a row; null again once the API answers for it.
     */
    goneAt: tz('gone_at'),
    /**
     * A digest of the cards its last applied answer listed (ids and content; an HMAC under a key
     * derived from the sealing key when tokens are sealed), set by every success that took the full path and cleared by anything else that
     * changes its cards (a move to another subscriber, the 404 policy). While it matches a new
     * answer's digest, that answer is identical to what is stored: no card row is read or written.
     */
    cardsDigest: text('cards_digest'),
    /**
     * The estimated rate at which its cards change, per day (src/freshness/estimate.ts); null
     * before its first success.
     */
    changeRatePerDay: doublePrecision('change_rate_per_day'),
    /** When the refresh means to sync it next; null: never planned (first in line). */
    nextRefreshAt: tz('next_refresh_at'),
    /**
     * Its latest observations (at most 32): days between two successes, negative when the later
     * one found the cards changed. What `change_rate_per_day` is estimated from.
     */
    changeObservations: real('change_observations').array(),
  },
  // No index on the sync timestamps: every sync moves them, and an index on one would turn each
  // of those updates into new entries in every index of the table (no HOT update). The one
  // exception is next_refresh_at, which the scheduler must read in order (the next 1,000 due out
  // of millions): a sync that moves it is not a HOT update (bench/RESULTS.md, issue 26).
  (t) => [
    // Only rows with an e-mail (migration 0022): a subscriber known by id alone, most of them, has
    // no entry to write on every sync that moves its row.
    uniqueIndex('subscribers_email_lower_idx').on(sql`lower(${t.email})`).where(sql`${t.email} is not null`),
    index('subscribers_next_refresh_idx').on(t.nextRefreshAt.asc().nullsFirst(), t.subscriberId),
  ],
);

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

/**
 * History as written: one row per change of a card but a card's first appearance, whose `added`
 * row the `saved_card_changes` view (db/views.ts) makes from the card's own row (migration 0021).
 * Kept when old `sync_runs` rows are pruned (no FK). Read `saved_card_changes`, which has them all.
 */
export const savedCardChangeLog = pgTable(
  'saved_card_change_log',
  {
    id: bigint('id', { mode: 'number' })
      .primaryKey()
      .generatedAlwaysAsIdentity({ name: 'saved_card_changes_id_seq' }),
    cardId: bigint('card_id', { mode: 'number' }).notNull(),
    subscriberId: bigint('subscriber_id', { mode: 'number' }).notNull(),
    change: text('change').$type<ChangeKind>().notNull(),
    /** Column names whose content changed (`updated`, or `restored` with new content). */
    changedFields: text('changed_fields').array(),
    /**
     * The earlier values of the changed fields (`card_token` only as `"changed"`), and for a restore
     * the `removed_at` it ends; null on rows written before migration 0008.
     */
    previous: jsonb('previous').$type<Record<string, unknown>>(),
    /**
     * Why a card was `removed`: null when the answer no longer listed it, `moved` when another
     * subscriber's answer took it, `not_found` when the API stopped knowing the subscriber. A
     * `conflict` row says `held_by_another`; a `restored` row that ends a conflict (the holder's
     * answer dropped the card, the claimant's took it) says `conflict_resolved`.
     */
    reason: text('reason'),
    syncRunId: bigint('sync_run_id', { mode: 'number' }),
    changedAt: tz('changed_at').notNull(),
  },
  (t) => [
    check('saved_card_changes_change_valid', sql`${t.change} in (${inList(CHANGE_KINDS)})`),
    index('saved_card_changes_card_id_idx').on(t.cardId),
    index('saved_card_changes_subscriber_changed_idx').on(t.subscriberId, t.changedAt),
    index('saved_card_changes_changed_at_idx').on(t.changedAt),
    // No index on sync_run_id (migration 0020): the one query by run, the subscriber page's, names
    // the subscriber too.
  ],
);

export const CONFLICT_RESOLUTIONS = ['claimant_dropped', 'moved'] as const;
export type ConflictResolution = (typeof CONFLICT_RESOLUTIONS)[number];

/**
 * A card listed by two subscribers at once: the one that holds it (its `saved_cards` row) and one
 * whose answer also lists it (the claimant). The card stays with its holder, and `token --card-id`
 * refuses it, until the claimant's answer no longer lists it (`claimant_dropped`) or the holder's
 * no longer does and the claimant's sync takes it (`moved`). One open row per card and claimant.
 */
export const cardConflicts = pgTable(
  'card_conflicts',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    cardId: bigint('card_id', { mode: 'number' }).notNull(),
    holderSubscriberId: bigint('holder_subscriber_id', { mode: 'number' }).notNull(),
    claimantSubscriberId: bigint('claimant_subscriber_id', { mode: 'number' }).notNull(),
    openedAt: tz('opened_at').notNull(),
    /** The claimant's last answer that listed the card. */
    lastSeenAt: tz('last_seen_at').notNull(),
    resolvedAt: tz('resolved_at'),
    resolution: text('resolution').$type<ConflictResolution>(),
  },
  (t) => [
    uniqueIndex('card_conflicts_open_idx')
      .on(t.cardId, t.claimantSubscriberId)
      .where(sql`${t.resolvedAt} is null`),
    index('card_conflicts_open_claimant_idx').on(t.claimantSubscriberId).where(sql`${t.resolvedAt} is null`),
    check('card_conflicts_resolution_valid', sql`${t.resolution} in (${inList(CONFLICT_RESOLUTIONS)})`),
  ],
);

/** `continuous`: one window of REFRESH_MODE=continuous (src/refresh/continuous.ts). */
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
    computedAt: tz('computed_at').notNull(),
  },
  (t) => [check('refresh_policy_one_row', sql`${t.id} = 1`)],
);

/**
 * The fleet: one row per long-running process (worker, admin server), with a heartbeat. A row
 * whose beat is older than the registry's timeout is a process gone without saying so.
 */
export const fleetProcesses = pgTable(
  'fleet_processes',
  {
    id: text('id').primaryKey(),
    role: text('role').notNull(),
    host: text('host').notNull(),
    pid: integer('pid').notNull(),
    version: text('version').notNull(),
    /** The newest migration this process's release ships (its journal's last tag). */
    knownMigration: text('known_migration').notNull(),
    /** Ids of the keys in its card-token ring (never the keys). */
    keyIds: text('key_ids').array().notNull().default(sql`'{}'::text[]`),
    concurrency: integer('concurrency'),
    /** The settings every process must share (rate limit, refresh mode and budget, queue prefix). */
    settings: jsonb('settings').$type<Record<string, unknown>>().notNull().default({}),
    startedAt: tz('started_at').notNull().defaultNow(),
    lastBeatAt: tz('last_beat_at').notNull().defaultNow(),
  },
  (t) => [index('fleet_processes_last_beat_idx').on(t.lastBeatAt)],
);

/**
 * The breaking migrations applied to this database (db/migrations/breaking.json): a worker whose
 * release does not know the newest of them refuses to start, and a running one leaves (exit 3).
 */
export const breakingMigrations = pgTable('breaking_migrations', {
  tag: text('tag').primaryKey(),
  appliedAt: tz('applied_at').notNull().defaultNow(),
});

export const ADMIN_SOURCES = ['cli', 'http'] as const;
export type AdminSource = (typeof ADMIN_SOURCES)[number];

/** Who did what: one row per operator action, from the CLI or HTTP. Never a secret in `detail`. */
export const adminActions = pgTable(
  'admin_actions',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    at: tz('at').notNull().defaultNow(),
    /** The token's name over HTTP (`operator`, `reader`); the OS user on the CLI. */
    actor: text('actor').notNull(),
    source: text('source').$type<AdminSource>().notNull(),
    action: text('action').notNull(),
    detail: jsonb('detail').$type<Record<string, unknown>>().notNull().default({}),
  },
  (t) => [
    check('admin_actions_source_valid', sql`${t.source} in (${inList(ADMIN_SOURCES)})`),
    index('admin_actions_at_idx').on(t.at),
  ],
);
