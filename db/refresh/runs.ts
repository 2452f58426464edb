import { and, desc, eq, inArray, isNull, lt, or, sql } from 'drizzle-orm';
import type { Db } from '../client.js';
import { rootCause } from '../errors.js';
import { type RefreshTrigger, refreshRuns, subscribers } from '../schema/index.js';

export type RefreshRun = typeof refreshRuns.$inferSelect;

export type StartResult = { started: true; run: RefreshRun } | { started: false; inProgress: RefreshRun };

/**
 * Opens a refresh run, unless one is already in progress (running or halted): a partial unique
 * index guarantees one at a time even when two processes try at the same instant.
 */
export async function startRefreshRun(
  db: Db,
  values: { trigger: RefreshTrigger; staleBefore?: Date | undefined; jobId?: string | undefined },
): Promise<StartResult> {
  // Look first: a refused start must not use up an id of the sequence (only a true race does).
  const running = await inProgressRun(db);
  if (running !== undefined) return { started: false, inProgress: running };
  try {
    const [run] = await db
      .insert(refreshRuns)
      .values({
        trigger: values.trigger,
        status: 'running',
        startedAt: new Date(),
        // Taken with the insert: a sync of this run can only begin after the run is committed, so
        // its id comes from the sequence after this value (ids are not indexed on their own).
        priorSyncRunId: sql`(select coalesce(pg_sequence_last_value('sync_runs_id_seq'), 0))`,
        staleBefore: values.staleBefore ?? null,
        jobId: values.jobId ?? null,
      })
      .returning();
    return { started: true, run: run! };
  } catch (error) {
    if (rootCause(error).code !== '23505') throw error;
    const inProgress = await inProgressRun(db);
    if (inProgress === undefined) return startRefreshRun(db, values);
    return { started: false, inProgress };
  }
}

/** How many subscribers a refresh would sync: all known ones, or those not synced since `staleBefore`. */
export async function countRefreshable(db: Db, staleBefore: Date | null): Promise<number> {
  const [row] = await db
    .select({ n: sql<number>`count(*)::int` })
    .from(subscribers)
    .where(
      staleBefore
        ? or(isNull(subscribers.lastSuccessAt), lt(subscribers.lastSuccessAt, staleBefore))
        : undefined,
    );
  return row?.n ?? 0;
}

/** Records the run's plan, made as its fan-out begins. */
export async function savePlan(
  db: Db,
  id: number,
  plan: {
    plannedSubscribers: number;
    rateBudgetPerSec: number | null;
    expectedFinishAt: Date | null;
    nextRefreshAt: Date | null;
  },
): Promise<RefreshRun> {
  const [run] = await db.update(refreshRuns).set(plan).where(eq(refreshRuns.id, id)).returning();
  return run!;
}

export async function inProgressRun(db: Db): Promise<RefreshRun | undefined> {
  const [run] = await db
    .select()
    .from(refreshRuns)
    .where(inArray(refreshRuns.status, ['running', 'halted']))
    .limit(1);
  return run;
}

export async function loadRefreshRun(db: Db, id: number): Promise<RefreshRun | undefined> {
  const [run] = await db.select().from(refreshRuns).where(eq(refreshRuns.id, id));
  return run;
}

export async function lastRefreshRun(db: Db): Promise<RefreshRun | undefined> {
  const [run] = await db.select().from(refreshRuns).orderBy(desc(refreshRuns.id)).limit(1);
  return run;
}

export async function setRefreshJobId(db: Db, id: number, jobId: string): Promise<void> {
  await db.update(refreshRuns).set({ jobId }).where(eq(refreshRuns.id, id));
}

/** Where a nightly run's fan-out stands: the last subscriber it took, and that one's due time. */
export interface SweepCursor {
  after: number;
  /** Null while still among the never planned (who come first). */
  afterDue: Date | null;
}

/**
 * The next keyset page of a refresh: never-planned subscribers first, then by the due time the
 * schedule holds, stale ones only if asked. What one run could not reach keeps its early due time
 * and comes first in the next one. A subscriber synced since the run began is not taken again.
 * A row behind its subscriber's plan (a sync planned later than the row says) is taken where it
 * stands, not caught up: a sweep takes everyone it reaches, and moving each row to its plan first
 * cost a non-HOT update of the schedule per subscriber, then a second from the sync's sooner plan
 * (about 600 of 1,400 WAL bytes of an unchanged nightly re-sync, `npm run bench:wal-cli`). The order
 * within a run is the schedule's as last written: a continuous refresh's claims and sooner plans
 * keep it, a nightly mode's own syncs leave it.
 */
export async function subscriberPage(
  db: Db,
  cursor: SweepCursor,
  limit: number,
  staleBefore: Date | null,
  runStartedAt: Date,
): Promise<{ ids: number[]; cursor: SweepCursor }> {
  const pool = db.$client;
  const ids: number[] = [];
  let next = cursor;
  // A page ends full, or at the end of the schedule.
  while (ids.length < limit) {
    const want = limit - ids.length;
    const { rows } = await pool.query<{
      subscriber_id: number;
      due_at: Date | null;
      take: boolean;
    }>(
      `select q.subscriber_id, q.due_at,
          (s.last_synced_at is null or s.last_synced_at < $3)
            and ($4::timestamptz is null or s.last_success_at is null or s.last_success_at < $4) as take
        from subscriber_schedule q join subscribers s on s.subscriber_id = q.subscriber_id
        where case when $5::timestamptz is null then q.due_at is not null or q.subscriber_id > $1
          else (q.due_at, q.subscriber_id) > ($5::timestamptz, $1::bigint) end
        order by q.due_at asc nulls first, q.subscriber_id limit $2`,
      [next.after, want, runStartedAt, staleBefore, next.afterDue],
    );
    for (const r of rows) {
      if (r.take) ids.push(r.subscriber_id);
      next = { after: r.subscriber_id, afterDue: r.due_at };
    }
    if (rows.length < want) break;
  }
  return { ids, cursor: next };
}

/** Records one fanned-out page: the cursor moves only after its jobs are in the queue. */
export async function recordFanoutPage(
  db: Db,
  id: number,
  page: { cursor: SweepCursor; subscribers: number; enqueued: number; alreadyQueued: number },
): Promise<void> {
  await db
    .update(refreshRuns)
    .set({
      cursor: page.cursor.after,
      cursorDue: page.cursor.afterDue,
      subscribersTotal: sql`${refreshRuns.subscribersTotal} + ${page.subscribers}`,
      enqueued: sql`${refreshRuns.enqueued} + ${page.enqueued}`,
      alreadyQueued: sql`${refreshRuns.alreadyQueued} + ${page.alreadyQueued}`,
    })
    .where(eq(refreshRuns.id, id));
}

export async function markFanoutFinished(db: Db, id: number): Promise<void> {
  await db.update(refreshRuns).set({ fanoutFinishedAt: new Date() }).where(eq(refreshRuns.id, id));
}

/**
 * The live counts of a refresh run: the sync processor keeps them in Redis as each job reaches its
 * final outcome (jobs/sync/refresh-tally.ts), and the refresh writes them onto the run. Declared
 * here, below both.
 */
export interface RefreshTally {
  finished: number;
  succeeded: number;
  failed: number;
  notFound: number;
  invalid: number;
  wiped: number;
  cardsAdded: number;
  cardsRemoved: number;
  cardsRestored: number;
}

/** Writes the live counts (kept in Redis while the run goes) onto the run; returns the run. */
export async function applyTally(db: Db, id: number, t: RefreshTally): Promise<RefreshRun> {
  const [run] = await db
    .update(refreshRuns)
    .set({
      succeeded: t.succeeded,
      failed: t.failed,
      notFound: t.notFound,
      invalid: t.invalid,
      wipedSubscribers: t.wiped,
      cardsAdded: t.cardsAdded,
      cardsRemoved: t.cardsRemoved,
      cardsRestored: t.cardsRestored,
    })
    .where(and(eq(refreshRuns.id, id), eq(refreshRuns.status, 'running')))
    .returning();
  return run ?? (await loadRefreshRun(db, id))!;
}

/** Gives up on a run whose refresh job is gone (failed for good, or never queued). */
export async function abandonRefreshRun(db: Db, id: number, reason: string): Promise<boolean> {
  const rows = await db
    .update(refreshRuns)
    .set({ status: 'abandoned', finishedAt: new Date(), haltedReason: reason })
    .where(and(eq(refreshRuns.id, id), eq(refreshRuns.status, 'running')))
    .returning({ id: refreshRuns.id });
  return rows.length === 1;
}

/** Trips the breaker: the run stops fanning out until an operator resumes it. */
export async function haltRefreshRun(db: Db, id: number, reason: string): Promise<boolean> {
  const rows = await db
    .update(refreshRuns)
    .set({ status: 'halted', haltedReason: reason })
    .where(
      and(
        eq(refreshRuns.id, id),
        eq(refreshRuns.status, 'running'),
        eq(refreshRuns.breakerOverridden, false),
      ),
    )
    .returning({ id: refreshRuns.id });
  return rows.length === 1;
}

/** An operator resumed: the halted run continues, with the breaker off for the rest of it. */
export async function resumeHaltedRun(db: Db): Promise<RefreshRun | undefined> {
  const [run] = await db
    .update(refreshRuns)
    .set({ status: 'running', breakerOverridden: true })
    .where(eq(refreshRuns.status, 'halted'))
    .returning();
  return run;
}

/**
 * Closes the run with exact counts (a run that matched no subscriber closes as `empty`, which no
 * one should mistake for a successful refresh): each subscriber's last outcome in this run (a transient
 * failure that later succeeded counts once, as a success).
 */
export async function closeRefreshRun(db: Db, id: number): Promise<RefreshRun | undefined> {
  // The run's rows, by the primary key: every one has an id above the run's prior_sync_run_id.
  // Sequential scans off, so that a ledger whose statistics are old or missing is not read whole.
  const [bounds] = await db
    .select({ prior: refreshRuns.priorSyncRunId })
    .from(refreshRuns)
    .where(eq(refreshRuns.id, id));
  if (bounds === undefined) return undefined;
  const ofRun = sql`refresh_run_id = ${id} and id > ${bounds.prior}`;
  const result = await db.transaction(async (tx) => {
    await tx.execute(sql`set local enable_seqscan = off`);
    return tx.execute(sql`
    update refresh_runs r set
      status = case when r.subscribers_total = 0 then 'empty' else 'completed' end,
      finished_at = now(),
      succeeded = t.succeeded,
      failed = t.failed,
      not_found = t.not_found,
      invalid = t.invalid,
      cards_added = t.cards_added,
      cards_removed = t.cards_removed,
      cards_restored = t.cards_restored,
      wiped_subscribers = t.wiped,
      last_sync_run_id = greatest(r.last_sync_run_id, t.last_id)
    from (select * from (
      select count(*) filter (where l.status in ('succeeded', 'superseded'))::int as succeeded,
             count(*) filter (where l.status = 'failed')::int as failed,
             count(*) filter (where l.status = 'not_found')::int as not_found,
             count(*) filter (where l.status = 'invalid_response')::int as invalid,
             -- Every card gone: an empty answer, or SYNC_GONE_AFTER_NOT_FOUND not_found answers in a row.
             count(*) filter (where l.removed > 0 and (l.status = 'not_found'
               or (l.status = 'succeeded' and l.cards_seen = 0)))::int as wiped,
             coalesce(max(l.id), 0) as last_id
      from (
        select distinct on (coalesce(subscriber_id::text, email)) id, status, removed, cards_seen
        from sync_runs where ${ofRun}
        order by coalesce(subscriber_id::text, email), id desc
      ) l
    ) s cross join (
      -- Cards of every attempt (a retried job's earlier attempts changed cards too).
      select coalesce(sum(inserted), 0)::int as cards_added, coalesce(sum(removed), 0)::int as cards_removed,
             coalesce(sum(restored), 0)::int as cards_restored
      from sync_runs where ${ofRun}
    ) a) t
    where r.id = ${id} and r.status = 'running'
    returning r.id`);
  });
  return result.rows.length === 1 ? loadRefreshRun(db, id) : undefined;
}
