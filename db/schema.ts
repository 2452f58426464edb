import { sql } from 'drizzle-orm';
import { bigint, check, index, integer, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';

// Table and column names are public (DESIGN §4): analysts and their scripts query them.

const tz = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

/** Masked shape only: a full card number can never be stored, whatever the code above does. */
export const MASKED_BIN_SQL = '^[0-9]{4}-[xX*]{4}-[xX*]{4}-[0-9]{4}$';

export const SYNC_TRIGGERS = ['manual', 'nightly', 'api', 'cli'] as const;
export type SyncTrigger = (typeof SYNC_TRIGGERS)[number];

export const SYNC_STATUSES = [
  'succeeded',
  'not_found',
  'invalid_response',
  'failed',
  'auth_rejected',
  'rate_limited',
] as const;
export type SyncStatus = (typeof SYNC_STATUSES)[number];

export const CHANGE_KINDS = ['added', 'updated', 'removed', 'restored'] as const;
export type ChangeKind = (typeof CHANGE_KINDS)[number];

const inList = (values: readonly string[]) => sql.raw(values.map((v) => `'${v}'`).join(', '));

/** One row per card ever seen. */
export const savedCards = pgTable(
  'saved_cards',
  {
    id: bigint('id', { mode: 'number' }).primaryKey(),
    subscriberId: bigint('subscriber_id', { mode: 'number' }).notNull(),
    cardToken: text('card_token').notNull(),
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
  },
  (t) => [
    check('saved_cards_bin_number_masked', sql`${t.binNumber} ~ ${sql.raw(`'${MASKED_BIN_SQL}'`)}`),
    index('saved_cards_subscriber_id_idx').on(t.subscriberId),
    index('saved_cards_active_subscriber_idx').on(t.subscriberId).where(sql`${t.removedAt} is null`),
    index('saved_cards_card_bank_code_idx').on(t.cardBankCode),
    index('saved_cards_company_id_idx').on(t.companyId),
    index('saved_cards_create_date_idx').on(t.createDate),
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
  },
  (t) => [
    uniqueIndex('subscribers_email_lower_idx').on(sql`lower(${t.email})`),
    index('subscribers_last_success_at_idx').on(t.lastSuccessAt),
  ],
);

/** One row per sync attempt, whatever its outcome. */
export const syncRuns = pgTable(
  'sync_runs',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
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
    index('sync_runs_started_at_idx').on(t.startedAt),
    index('sync_runs_refresh_run_id_idx').on(t.refreshRunId),
  ],
);

/** History: one row per change of a card. Kept when old `sync_runs` rows are pruned (no FK). */
export const savedCardChanges = pgTable(
  'saved_card_changes',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    cardId: bigint('card_id', { mode: 'number' }).notNull(),
    subscriberId: bigint('subscriber_id', { mode: 'number' }).notNull(),
    change: text('change').$type<ChangeKind>().notNull(),
    /** Column names whose content changed (`updated`, or `restored` with new content). */
    changedFields: text('changed_fields').array(),
    syncRunId: bigint('sync_run_id', { mode: 'number' }),
    changedAt: tz('changed_at').notNull(),
  },
  (t) => [
    check('saved_card_changes_change_valid', sql`${t.change} in (${inList(CHANGE_KINDS)})`),
    index('saved_card_changes_card_id_idx').on(t.cardId),
    index('saved_card_changes_subscriber_changed_idx').on(t.subscriberId, t.changedAt),
    index('saved_card_changes_changed_at_idx').on(t.changedAt),
    index('saved_card_changes_sync_run_id_idx').on(t.syncRunId),
  ],
);
