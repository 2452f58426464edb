import { sql } from 'drizzle-orm';
import { bigint, check, index, jsonb, pgTable, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { inList, tz } from './columns.js';

// The cards and their history (docs/analytics.md): saved_cards, the change log behind the
// saved_card_changes view, and the conflicts between subscribers over one card.

/** Masked shape only: a full card number can never be stored, whatever the code above does. */
export const MASKED_BIN_SQL = '^[0-9]{4}-[xX*]{4}-[xX*]{4}-[0-9]{4}$';

/**
 * `conflict`: the subscriber's answer listed a card another subscriber holds as active; the card
 * stayed with its holder (see {@link cardConflicts}). It changes no column.
 */
export const CHANGE_KINDS = ['added', 'updated', 'removed', 'restored', 'conflict'] as const;
export type ChangeKind = (typeof CHANGE_KINDS)[number];

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

/**
 * History as written: one row per change of a card but a card's first appearance, whose `added`
 * row the `saved_card_changes` view (db/schema/views.ts) makes from the card's own row (migration 0021).
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
