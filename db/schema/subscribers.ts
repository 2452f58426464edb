import { sql } from 'drizzle-orm';
import {
  bigint,
  doublePrecision,
  index,
  integer,
  pgTable,
  real,
  text,
  uniqueIndex,
} from 'drizzle-orm/pg-core';
import { tz } from './columns.js';

// The subscribers (DESIGN §4): one row each, with what the refresh knows of them.

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
