import { sql } from 'drizzle-orm';
import type { Db, Tx } from '../client.js';
import { type EventCounts, eventsCommitted, writeChangeEventsIn } from '../events/index.js';
import { insertSyncRun, type NewSyncRun, recordSubscriberFailure } from './subscribers.js';

/** The `sync_runs` row of the answer; its subscriber and `removed` are filled in here. */
type RunToWrite = Omit<NewSyncRun, 'subscriberId' | 'removed'> & { finishedAt: Date };

/** A `not_found` answer to record. */
export interface NotFoundAnswer {
  run: RunToWrite;
  /** The subscriber asked for, or the one stored with the e-mail asked for; null when unknown. */
  subscriberId: number | null;
  /** `subscribers.last_error` for the failure bookkeeping. */
  error: string;
  /** `SYNC_GONE_AFTER_NOT_FOUND`: the count at which active cards are removed; 0 = never. */
  goneAfter: number;
  /** `CHANGE_EVENTS=on`: the cards it marks removed are also written as change events. */
  changeEvents: boolean;
  /** While tracing is on: the sync's trace context, which the events of its removals carry. */
  spanContext?: string | undefined;
}

/** What recording a `not_found` answer did. */
export interface NotFoundRecorded {
  syncRunId: number;
  /**
   * Whether the answer counted towards `consecutive_not_found`: not when it was fetched before a
   * success already applied (older news), nor when a `not_found` of the same job is already
   * recorded (a job delivered again after its worker died counts once).
   */
  counted: boolean;
  /** The subscriber's count afterwards; null for a subscriber not stored. */
  consecutiveNotFound: number | null;
  /** Active cards marked removed by this answer. */
  removed: number;
}

interface State {
  consecutive_not_found: number;
  newest_success: Date | null;
  job_counted: boolean;
  /** Known only because an operator enqueued it: never a success, never a card. */
  only_registered: boolean;
}

/**
 * Records a `not_found` answer in one transaction, under the subscriber's advisory lock (the one
 * the write path takes, so it never interleaves with a sync of the same subscriber): the
 * `sync_runs` row, the failure bookkeeping, `consecutive_not_found` one higher, and once that
 * reaches `goneAfter`, every active card of the subscriber marked removed with a history row of
 * reason `not_found`, `active_cards` 0 and `gone_at` set. An unknown subscriber gets its run only.
 */
export async function recordNotFound(db: Db, answer: NotFoundAnswer): Promise<NotFoundRecorded> {
  const subscriberId = answer.subscriberId;
  if (subscriberId === null) {
    const syncRunId = await insertSyncRun(db, { ...answer.run, subscriberId: null });
    return { syncRunId, counted: false, consecutiveNotFound: null, removed: 0 };
  }
  let events: EventCounts = {};
  const recorded = await db.transaction(async (tx) => {
    // The key of db/sync/batch-read.ts's lock statement, hashed the same way.
    await tx.execute(
      sql`select pg_advisory_xact_lock(hashtextextended(${`cards-sync:subscriber:${subscriberId}`}, 0))`,
    );
    const state = await readState(tx, subscriberId, answer.run);
    if (state === undefined) {
      // Not stored: nothing to count or remove (a sync that creates it starts from 0).
      const syncRunId = await insertSyncRun(tx, { ...answer.run, subscriberId });
      return { syncRunId, counted: false, consecutiveNotFound: null, removed: 0 };
    }
    if (state.only_registered) {
      // An id an enqueue made known (db/sync/subscribers.ts `registerSubscribers`) that the API
      // does not know either: it held nothing but its id, so it goes, and the id is what it was
      // before that enqueue, unknown with its run. Kept, a mistyped id would be asked about for
      // ever and counted among the never synced.
      await tx.execute(sql`delete from subscribers where subscriber_id = ${subscriberId}`);
      await tx.execute(sql`delete from subscriber_schedule where subscriber_id = ${subscriberId}`);
      const syncRunId = await insertSyncRun(tx, { ...answer.run, subscriberId });
      return { syncRunId, counted: false, consecutiveNotFound: null, removed: 0 };
    }
    const stale =
      state.newest_success !== null && state.newest_success.getTime() > answer.run.startedAt.getTime();
    const counted = !stale && !state.job_counted;
    const count = state.consecutive_not_found + (counted ? 1 : 0);
    const remove = counted && answer.goneAfter > 0 && count >= answer.goneAfter;
    const { syncRunId, removed } = await insertRunAndRemove(tx, subscriberId, answer.run, remove);
    // Each card marked removed is an event, in this transaction (db/events/outbox.ts).
    if (removed > 0 && answer.changeEvents)
      events = await writeChangeEventsIn(tx, {
        subscriberIds: [subscriberId],
        at: answer.run.finishedAt,
        ...(answer.spanContext ? { spanContexts: new Map([[subscriberId, answer.spanContext]]) } : {}),
      });
    // Cards first, then the subscriber's row, the order in which the write path locks them.
    await recordSubscriberFailure(tx, {
      subscriberId,
      status: 'not_found',
      error: answer.error,
      now: answer.run.finishedAt,
    });
    if (counted) {
      await tx.execute(sql`
        update subscribers set
          consecutive_not_found = ${count},
          active_cards = case when ${remove}::boolean then 0 else active_cards end,
          gone_at = case when ${remove}::boolean then coalesce(gone_at, ${answer.run.finishedAt}) else gone_at end,
          -- Its stored cards are no longer what its last answer listed.
          cards_digest = case when ${remove}::boolean then null else cards_digest end
        where subscriber_id = ${subscriberId}`);
    }
    return { syncRunId, counted, consecutiveNotFound: count, removed };
  });
  eventsCommitted(events);
  return recorded;
}

async function readState(tx: Tx, subscriberId: number, run: RunToWrite): Promise<State | undefined> {
  // Read under the lock: only syncs of this subscriber, which take it too, change these.
  const result = await tx.execute<Omit<State, 'newest_success'> & { newest_success: string | null }>(sql`
    select s.consecutive_not_found,
      -- Only a success fetched after this answer makes it older news: the newest days alone.
      (select started_at from sync_runs
        where subscriber_id = s.subscriber_id and status = 'succeeded' and started_at > ${run.startedAt}
        order by started_at desc limit 1) as newest_success,
      (${run.jobId ?? null}::text is not null and exists (
        select 1 from sync_runs
          where subscriber_id = s.subscriber_id and job_id = ${run.jobId ?? null} and status = 'not_found'
      )) as job_counted,
      (s.last_success_at is null and s.email is null
        and not exists (select 1 from saved_cards c where c.subscriber_id = s.subscriber_id)) as only_registered
    from subscribers s where s.subscriber_id = ${subscriberId}`);
  const row = result.rows[0];
  if (row === undefined) return undefined;
  // db.execute hands timestamps over as text.
  const newest = row.newest_success === null ? null : new Date(row.newest_success);
  return { ...row, newest_success: newest };
}

/**
 * One statement: when `remove`, the subscriber's active cards are locked (ascending ids, as every
 * other writer of cards locks them) and marked removed, the run row counts them, and one history
 * row per card names the run and the reason.
 */
async function insertRunAndRemove(
  tx: Tx,
  subscriberId: number,
  run: RunToWrite,
  remove: boolean,
): Promise<{ syncRunId: number; removed: number }> {
  const now = run.finishedAt;
  const result = await tx.execute<{ id: number; removed: number }>(sql`
    with gone as materialized (
      select id from saved_cards
        where subscriber_id = ${subscriberId} and removed_at is null and ${remove}::boolean
        order by id for update
    ), removed as (
      -- last_seen_at: the last success listed the card (docs/analytics.md); its own column takes that value.
      update saved_cards c set removed_at = ${now}, last_seen_at = greatest(c.last_seen_at, (
          select o.last_success_at from subscribers o where o.subscriber_id = c.subscriber_id))
        from gone where c.id = gone.id and c.subscriber_id = ${subscriberId} and c.removed_at is null
        returning c.id
    ), run as (
      insert into sync_runs (subscriber_id, email, trigger, job_id, refresh_run_id, started_at,
          finished_at, status, removed, error_code, error_message)
        values (${subscriberId}, ${run.email ?? null}, ${run.trigger}, ${run.jobId ?? null},
          ${run.refreshRunId ?? null}, ${run.startedAt}, ${now}, ${run.status},
          (select count(*) from removed)::int, ${run.errorCode ?? null}, ${run.errorMessage ?? null})
        returning id
    ), changed as (
      insert into saved_card_change_log (card_id, subscriber_id, change, reason, sync_run_id, changed_at)
        select r.id, ${subscriberId}::bigint, 'removed', 'not_found', run.id, ${now}::timestamptz
        from removed r cross join run
        order by r.id
    )
    select run.id, (select count(*) from removed)::int as removed from run`);
  const row = result.rows[0]!;
  return { syncRunId: Number(row.id), removed: row.removed };
}
