import { eq, sql } from 'drizzle-orm';
import { bigint, jsonb, pgView, text, timestamp } from 'drizzle-orm/pg-core';
import { type ChangeKind, savedCards } from './cards.js';
import { syncRuns } from './ledger.js';
import { subscribers } from './subscribers.js';

// The reporting views (docs/analytics.md): what analysts read. Their names and columns are public.

/** Active cards without `card_token`, for analysts who must not see tokens. */
export const savedCardsActive = pgView('saved_cards_active').as((qb) =>
  qb
    .select({
      id: savedCards.id,
      subscriberId: savedCards.subscriberId,
      binNumber: savedCards.binNumber,
      cardFamily: savedCards.cardFamily,
      cardBankCode: savedCards.cardBankCode,
      cardBankName: savedCards.cardBankName,
      companyId: savedCards.companyId,
      createDate: savedCards.createDate,
      firstSeenAt: savedCards.firstSeenAt,
      // An active card's own column moves only when the card is written; every success of its
      // subscriber lists it (docs/analytics.md), so the later of the two is when a sync last listed it.
      lastSeenAt: sql<Date>`greatest(${savedCards.lastSeenAt}, ${subscribers.lastSuccessAt})`.as(
        'last_seen_at',
      ),
      updatedAt: savedCards.updatedAt,
    })
    .from(savedCards)
    .leftJoin(subscribers, eq(subscribers.subscriberId, savedCards.subscriberId))
    .where(sql`${savedCards.removedAt} is null`),
);

/** How fresh each subscriber's copy is. */
export const subscriberFreshness = pgView('subscriber_freshness').as((qb) =>
  qb
    .select({
      subscriberId: subscribers.subscriberId,
      lastSuccessAt: subscribers.lastSuccessAt,
      age: sql<string>`now() - ${subscribers.lastSuccessAt}`.as('age'),
      lastSyncedAt: subscribers.lastSyncedAt,
      lastStatus: subscribers.lastStatus,
      consecutiveFailures: subscribers.consecutiveFailures,
      activeCards: subscribers.activeCards,
    })
    .from(subscribers),
);

/**
 * Every column of `subscribers` but `email` (analysts have no right on e-mails) and `cards_digest`
 * (the sync's own shortcut, keyed under the sealing key): what analysts read. New columns go at the
 * end, so a migration can `CREATE OR REPLACE` the view and keep its grants.
 */
export const subscribersReport = pgView('subscribers_report').as((qb) =>
  qb
    .select({
      subscriberId: subscribers.subscriberId,
      lastSyncedAt: subscribers.lastSyncedAt,
      lastSuccessAt: subscribers.lastSuccessAt,
      lastStatus: subscribers.lastStatus,
      lastError: subscribers.lastError,
      consecutiveFailures: subscribers.consecutiveFailures,
      activeCards: subscribers.activeCards,
      consecutiveNotFound: subscribers.consecutiveNotFound,
      goneAt: subscribers.goneAt,
      // The freshness model (migration 0024): the estimated rate, the plan, and what it is estimated from.
      changeRatePerDay: subscribers.changeRatePerDay,
      nextRefreshAt: subscribers.nextRefreshAt,
      changeObservations: subscribers.changeObservations,
      // The rate the estimate reads (migration 0038).
      staleRatePerDay: subscribers.staleRatePerDay,
    })
    .from(subscribers),
);

/** Every column of `sync_runs` but `email`, for analysts. */
export const syncRunsReport = pgView('sync_runs_report').as((qb) =>
  qb
    .select({
      id: syncRuns.id,
      subscriberId: syncRuns.subscriberId,
      trigger: syncRuns.trigger,
      jobId: syncRuns.jobId,
      refreshRunId: syncRuns.refreshRunId,
      startedAt: syncRuns.startedAt,
      finishedAt: syncRuns.finishedAt,
      status: syncRuns.status,
      cardsSeen: syncRuns.cardsSeen,
      inserted: syncRuns.inserted,
      updated: syncRuns.updated,
      unchanged: syncRuns.unchanged,
      removed: syncRuns.removed,
      restored: syncRuns.restored,
      errorCode: syncRuns.errorCode,
      errorMessage: syncRuns.errorMessage,
    })
    .from(syncRuns),
);

/**
 * History, one row per change of a card (docs/analytics.md): the rows written to `saved_card_change_log`,
 * and for each card stored since migration 0021 its `added` row, made from the card's own row
 * (`added_change_id`, `added_sync_run_id`, `first_seen_at`). An INSTEAD OF trigger sends rows
 * inserted here to the log. Created by migration 0021, not by drizzle-kit.
 */
export const savedCardChanges = pgView('saved_card_changes', {
  id: bigint('id', { mode: 'number' }).notNull(),
  cardId: bigint('card_id', { mode: 'number' }).notNull(),
  subscriberId: bigint('subscriber_id', { mode: 'number' }).notNull(),
  change: text('change').$type<ChangeKind>().notNull(),
  changedFields: text('changed_fields').array(),
  previous: jsonb('previous').$type<Record<string, unknown>>(),
  reason: text('reason'),
  syncRunId: bigint('sync_run_id', { mode: 'number' }),
  changedAt: timestamp('changed_at', { withTimezone: true, mode: 'date' }).notNull(),
}).existing();
