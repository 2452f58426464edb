import { and, asc, desc, eq, gt, max, sql } from 'drizzle-orm';
import type { Db, Executor } from '../client.js';
import { savedCardChanges, savedCards, subscribers, syncRuns } from '../schema/index.js';
import { findSubscriberIdByEmail } from '../sync/index.js';

// What the ops page shows of one subscriber. `card_token` is never selected: the page cannot
// show what it never read.

/** Most cards the page lists (active first). */
const PAGE_CARDS = 500;
/** Runs the page lists, newest first. */
const PAGE_RUNS = 20;
/** History rows the page lists, newest first. */
const PAGE_CHANGES = 50;

/** The columns of a run as the admin pages and API show it. */
export const runColumns = {
  id: syncRuns.id,
  trigger: syncRuns.trigger,
  refreshRunId: syncRuns.refreshRunId,
  status: syncRuns.status,
  startedAt: syncRuns.startedAt,
  finishedAt: syncRuns.finishedAt,
  cardsSeen: syncRuns.cardsSeen,
  inserted: syncRuns.inserted,
  updated: syncRuns.updated,
  unchanged: syncRuns.unchanged,
  removed: syncRuns.removed,
  restored: syncRuns.restored,
  errorCode: syncRuns.errorCode,
  errorMessage: syncRuns.errorMessage,
};

/**
 * Everything the subscriber page shows, read from one snapshot so that a sync committing meanwhile
 * shows everywhere or nowhere; with `since`, also the newest run after it and the cards that run
 * changed. All lists are empty and `subscriber` null when nothing is stored.
 */
export async function loadSubscriberPage(db: Db, subscriberId: number, since?: number) {
  return db.transaction(
    async (tx) => {
      const page = await readPage(tx, subscriberId);
      const newRun = since === undefined ? undefined : await newestRunAfter(tx, { subscriberId }, since);
      const changed = newRun ? await cardsChangedBy(tx, newRun.id, subscriberId) : new Map<number, string>();
      return { ...page, newRun, changed };
    },
    { isolationLevel: 'repeatable read', accessMode: 'read only' },
  );
}

async function readPage(tx: Executor, subscriberId: number) {
  // One after another: a transaction has one connection.
  const subscriberRows = await tx
    .select()
    .from(subscribers)
    .where(eq(subscribers.subscriberId, subscriberId));
  const cards = await tx
    .select({
      id: savedCards.id,
      binNumber: savedCards.binNumber,
      cardBankName: savedCards.cardBankName,
      cardBankCode: savedCards.cardBankCode,
      cardFamily: savedCards.cardFamily,
      companyId: savedCards.companyId,
      createDate: savedCards.createDate,
      firstSeenAt: savedCards.firstSeenAt,
      lastSeenAt: savedCards.lastSeenAt,
      updatedAt: savedCards.updatedAt,
      removedAt: savedCards.removedAt,
    })
    .from(savedCards)
    .where(eq(savedCards.subscriberId, subscriberId))
    .orderBy(sql`${savedCards.removedAt} is not null`, desc(savedCards.removedAt), asc(savedCards.id))
    .limit(PAGE_CARDS + 1);
  const runs = await tx
    .select(runColumns)
    .from(syncRuns)
    .where(eq(syncRuns.subscriberId, subscriberId))
    .orderBy(desc(syncRuns.id))
    .limit(PAGE_RUNS);
  const changes = await tx
    .select({
      id: savedCardChanges.id,
      changedAt: savedCardChanges.changedAt,
      cardId: savedCardChanges.cardId,
      change: savedCardChanges.change,
      changedFields: savedCardChanges.changedFields,
      previous: savedCardChanges.previous,
      reason: savedCardChanges.reason,
      syncRunId: savedCardChanges.syncRunId,
    })
    .from(savedCardChanges)
    .where(eq(savedCardChanges.subscriberId, subscriberId))
    .orderBy(desc(savedCardChanges.changedAt), desc(savedCardChanges.id))
    .limit(PAGE_CHANGES);
  // An active card was last seen by its subscriber's last success (docs/analytics.md), as in saved_cards_active.
  const lastSuccess = subscriberRows[0]?.lastSuccessAt ?? null;
  for (const c of cards) {
    if (c.removedAt === null && lastSuccess !== null && lastSuccess > c.lastSeenAt)
      c.lastSeenAt = lastSuccess;
  }
  return {
    subscriber: subscriberRows[0] ?? null,
    cards: cards.slice(0, PAGE_CARDS),
    moreCards: cards.length > PAGE_CARDS,
    runs,
    changes,
  };
}
export type SubscriberPageData = Awaited<ReturnType<typeof loadSubscriberPage>>;
export type PageRun = Awaited<ReturnType<typeof readPage>>['runs'][number];

/**
 * The subscriber stored with an e-mail (ignoring case) and, with `since`, the e-mail's newest run
 * after it, from one snapshot: a sync that learns the e-mail shows in both or in neither.
 */
export async function lookupEmail(db: Db, email: string, since?: number) {
  return db.transaction(
    async (tx) => ({
      subscriberId: await findSubscriberIdByEmail(tx, email),
      newRun: since === undefined ? undefined : await newestRunAfter(tx, { email }, since),
    }),
    { isolationLevel: 'repeatable read', accessMode: 'read only' },
  );
}

/**
 * The highest `sync_runs.id` of a subscriber (through its index), or the last the sequence handed
 * out (no index holds ids alone): 0 when there is none. Every run written later has a higher id.
 */
export async function latestRunId(db: Db, subscriberId?: number): Promise<number> {
  if (subscriberId === undefined) {
    const [last] = await db
      .execute<{ id: string | null }>(sql`select pg_sequence_last_value('sync_runs_id_seq') as id`)
      .then((r) => r.rows);
    return Number(last?.id ?? 0);
  }
  const [row] = await db
    .select({ id: max(syncRuns.id) })
    .from(syncRuns)
    .where(eq(syncRuns.subscriberId, subscriberId));
  return row?.id ?? 0;
}

/**
 * The newest run after `since` of a subscriber, or of an e-mail (ignoring case); `since` bounds the
 * primary-key range, so only the newest rows are read.
 */
async function newestRunAfter(
  db: Executor,
  who: { subscriberId: number } | { email: string },
  since: number,
): Promise<PageRun | undefined> {
  const whom =
    'subscriberId' in who
      ? eq(syncRuns.subscriberId, who.subscriberId)
      : sql`lower(${syncRuns.email}) = lower(${who.email})`;
  const [row] = await db
    .select(runColumns)
    .from(syncRuns)
    .where(and(gt(syncRuns.id, since), whom))
    .orderBy(desc(syncRuns.id))
    .limit(1);
  return row;
}

/** The cards one run of a subscriber changed in its wallet, and how (`added`, `updated`, `removed`, `restored`). */
async function cardsChangedBy(
  db: Executor,
  syncRunId: number,
  subscriberId: number,
): Promise<Map<number, string>> {
  // Through the subscriber's history index: sync_run_id has none of its own.
  const rows = await db
    .select({ cardId: savedCardChanges.cardId, change: savedCardChanges.change })
    .from(savedCardChanges)
    .where(and(eq(savedCardChanges.subscriberId, subscriberId), eq(savedCardChanges.syncRunId, syncRunId)));
  return new Map(rows.map((r) => [r.cardId, r.change]));
}
