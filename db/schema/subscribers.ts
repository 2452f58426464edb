import { sql } from 'drizzle-orm';
import {
  bigint,
  doublePrecision,
  index,
  integer,
  pgTable,
  real,
  text,
  timestamp,
  uniqueIndex,
} from 'drizzle-orm/pg-core';
import { tz } from './columns.js';

// The subscribers (docs/analytics.md): one row each, with what the refresh knows of them.

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
    /**
     * The rate the estimate of the stale share reads for it until its next sync, once it has syncs
     * of its own: the one that keeps its copy stale over its planned interval as long as its rate's
     * posterior does (src/freshness/mixture.ts `posteriorStaleRate`); null while the plan has no
     * mixture, or in a row last synced by a release before migration 0038, where the estimate reads
     * `change_rate_per_day`.
     */
    staleRatePerDay: doublePrecision('stale_rate_per_day'),
    /**
     * When its last sync planned the next one (src/freshness/schedule.ts); null: never planned.
     * Not indexed: the scheduler reads `subscriber_schedule` instead (migration 0025).
     */
    nextRefreshAt: tz('next_refresh_at'),
    /**
     * Its latest observations (at most 32): days between two successes, negative when the later
     * one found the cards changed. What `change_rate_per_day` is estimated from.
     */
    changeObservations: real('change_observations').array(),
  },
  // No index on anything a sync moves (its timestamps, the plan): an index on one would turn each
  // of those updates into new entries in every index of the table (no HOT update). The scheduler
  // reads due times in order from subscriber_schedule instead.
  (t) => [
    // Only rows with an e-mail (migration 0022): a subscriber known by id alone, most of them, has
    // no entry to write on every sync that moves its row.
    uniqueIndex('subscribers_email_lower_idx').on(sql`lower(${t.email})`).where(sql`${t.email} is not null`),
  ],
);

/**
 * The continuous refresh's queue (migration 0025): one row per subscriber, kept by a trigger on
 * `subscribers`, ordered by `due_at` on its own index, so that moving a due time rewrites this
 * narrow row and not the wide one. `due_at` is never later than when the subscriber is due
 * (`greatest(due_at, subscribers.next_refresh_at)`): a sync of a row a claim holds sets it to the
 * sync's plan (a trigger on `subscribers`, whoever syncs), a plan that comes sooner lowers it
 * (the same trigger, whoever writes the plan), and a plan that moved later without a hold is
 * caught up by the claim that reaches the row (db/refresh/schedule.ts). Null: never planned, first in line. In whole milliseconds (migration
 * 0034): the nightly sweep's keyset cursor holds a due time as a JavaScript Date, and one enqueue's
 * rows, written at one `now()` to the microsecond, compared after it again and again.
 */
export const subscriberSchedule = pgTable(
  'subscriber_schedule',
  {
    // No foreign key: its check would lock each new subscriber's row (a WAL record on every first
    // sync), and `truncate subscribers` would need this table named too. The claim joins
    // subscribers, and a subscriber inserted again resets its row (the trigger).
    subscriberId: bigint('subscriber_id', { mode: 'number' }).primaryKey(),
    dueAt: timestamp('due_at', { withTimezone: true, mode: 'date', precision: 3 }),
    /**
     * Until when a claim holds the row (migration 0037): the subscriber was handed to the queue and
     * is not handed out again before then, unless its sync ends the hold first (the trigger on
     * `subscribers`: its plan becomes `due_at`, or, a failed sync, the hold's end). Null: not held.
     * Not indexed, so that a claim's write of it is a HOT update (no new index entries).
     */
    leasedUntil: timestamp('leased_until', { withTimezone: true, mode: 'date', precision: 3 }),
  },
  // fillfactor 50 (migration 0037, SQL only): room on each page for the claim's HOT update.
  (t) => [index('subscriber_schedule_due_idx').on(t.dueAt.asc().nullsFirst(), t.subscriberId)],
);
