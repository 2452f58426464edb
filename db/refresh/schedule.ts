import type pg from 'pg';

// The continuous refresh's reads and writes of `subscriber_schedule` and `subscribers`: the next
// due, a uniform sample, and the sample the plan is made from. Every choice here reads an index or
// a sample, never the whole table (bench/freshness-index.ts measures it at 10M subscribers).

interface DueRow {
  subscriber_id: number;
  /** Its `due_at` as the claim read it: the claim's write holds the row only if it is still that. */
  due_at: Date | null;
  behind: boolean;
  last_success_ms: number | null;
  change_rate_per_day: number | null;
  now_ms: number;
}

/** A claimed subscriber's schedule, as the claim reads it: what its next due time is planned from. */
interface ClaimedSchedule {
  /** Its last success, ms since the epoch. */
  lastSuccessAt: number | null;
  /** Not read by the claim. */
  observations: null;
  ratePerDay: number | null;
}

/**
 * When a claimed subscriber is due next, in ms, from its schedule and Postgres's clock at the claim
 * (ms): the policy's (src/freshness/schedule.ts `afterClaim` under the plan's parameters).
 */
type NextDueAfterClaim = (subscriber: ClaimedSchedule, nowMs: number) => number;

/** Arbitrary constant: the advisory lock that serialises claims of the continuous refresh. */
const CLAIM_LOCK_KEY = 7_246_118_503;

/** Rounds of catching up (below) one claim makes before it hands out what it has. */
const CLAIM_ROUNDS = 8;

/**
 * A row of `subscriber_schedule` is behind when its subscriber's plan (`subscribers.next_refresh_at`,
 * set by its last sync) is later than the row's `due_at`: the sync planned later than the claim
 * did, and wrote only the wide row. The subscriber is due at `greatest(due_at, next_refresh_at)`.
 * `due_at` holds whole milliseconds (migration 0034, rounded): a plan written to the microsecond (a
 * person's UPDATE) is compared at the millisecond, or its row would look behind after every catch-up.
 */
const BEHIND = `(date_trunc('milliseconds', s.next_refresh_at) > q.due_at or (q.due_at is null and s.next_refresh_at is not null))`;

/**
 * Not held by a claim: one whose hold ended (its job lost, or not yet run) is due again. A held row
 * stays where its due time puts it (at the front, mostly) and is passed over, not moved: the hold
 * is written to `leased_until`, which no index reads, so that the claim's write is a HOT update
 * (migration 0037). The rows passed over are those in the queue, a few seconds of the budget.
 */
const UNHELD = '(q.leased_until is null or q.leased_until <= clock_timestamp())';

/** Of the ids in $1, the rows no other transaction is writing, each locked for this one. */
const NOT_BEING_WRITTEN = `in (select subscriber_id from subscriber_schedule
  where subscriber_id = any($1::bigint[]) for update skip locked)`;

/**
 * Moves behind rows of `ids` up to their subscriber's plan; they take their place further on. A row
 * a sync is writing is skipped, not waited for (the next claim reaches it). Few rows: only those
 * a sync that was not held planned later.
 */
async function catchUp(client: Pick<pg.PoolClient, 'query'>, ids: number[]): Promise<void> {
  if (ids.length === 0) return;
  await client.query({
    name: 'cards-sync-schedule-catch-up',
    text: `update subscriber_schedule q set due_at = s.next_refresh_at from subscribers s
      where s.subscriber_id = q.subscriber_id and ${BEHIND} and q.subscriber_id ${NOT_BEING_WRITTEN}`,
    values: [ids],
  });
}

/**
 * How long the claim's write of its holds waits for a row another transaction is writing (a sync,
 * a person's UPDATE left open) before it writes them skipping such rows instead: well under
 * Postgres's deadlock_timeout (1 s by default), so that a sync batch waiting on a row the claim
 * holds is never the one a deadlock check cancels.
 */
const HOLD_WAIT = '200ms';

/** A row not yet due, as {@link claimDue} hands it to its chooser: its due time and last success, ms. */
interface NotYetDue {
  id: number;
  dueAt: number;
  lastSuccessAt: number | null;
}

/**
 * Where the budget left over once every due row is handed out goes, as the caller's policy says
 * (src/freshness/schedule.ts `chooseAhead`, `aheadWindow`): of the `window(count)` rows due soonest,
 * the `count` it chooses, given Postgres's clock (ms).
 */
interface Ahead {
  choose(rows: NotYetDue[], count: number, nowMs: number): number[];
  window(count: number): number;
}

/**
 * Takes the `limit` subscribers due first (never planned first, then by due time) that no claim
 * holds, holds each until the policy says the claim lets it go (`afterClaim`, handed in by the
 * caller; its sync ends the hold sooner), and returns them. It reads `subscriber_schedule` in
 * `due_at` order; a row found behind its subscriber's plan (a sync that was not held: the audit,
 * an operator's, a nightly one) is caught up and not handed out (it is due later), which costs
 * this claim one narrow update instead of costing every such sync a second row. Two schedulers
 * never take the same subscriber, and a row a sync moved while the claim read it is not taken.
 */
export async function claimDue(
  pool: pg.Pool,
  limit: number,
  afterClaim: NextDueAfterClaim,
  ahead?: Ahead,
): Promise<number[]> {
  if (limit <= 0) return [];
  const client = await pool.connect();
  try {
    await client.query('begin');
    // One claim at a time across schedulers: the next claim's reads come after this one's commit
    // and see its holds. The rows themselves are not locked as they are read (a row lock is a WAL
    // record each, about 65 bytes a sync): the hold is written only where the row is still as it
    // was read (below), which a sync that moved it since no longer is.
    await client.query('select pg_advisory_xact_lock($1)', [CLAIM_LOCK_KEY]);
    const taken: DueRow[] = [];
    for (let round = 0; round < CLAIM_ROUNDS && taken.length < limit; round++) {
      // Every row this one reads is due no later than any row after it; those not behind are due
      // when their row says, so they are among the first due whatever the behind ones turn out to be.
      const { rows } = await client.query<DueRow>({
        name: 'cards-sync-claim-due',
        text: `select q.subscriber_id, q.due_at, ${BEHIND} as behind,
            (extract(epoch from s.last_success_at) * 1000)::float8 as last_success_ms,
            s.change_rate_per_day, (extract(epoch from clock_timestamp()) * 1000)::float8 as now_ms
          from subscriber_schedule q join subscribers s on s.subscriber_id = q.subscriber_id
          where q.subscriber_id <> all($2::bigint[]) and ($3::boolean or q.due_at is null or q.due_at <= clock_timestamp())
            and ${UNHELD}
          order by q.due_at asc nulls first, q.subscriber_id
          limit $1`,
        values: [limit - taken.length, taken.map((r) => r.subscriber_id), ahead === undefined],
      });
      const behind = rows.filter((r) => r.behind).map((r) => r.subscriber_id);
      taken.push(...rows.filter((r) => !r.behind));
      if (behind.length === 0) break;
      await catchUp(client, behind);
    }
    if (ahead && taken.length < limit) taken.push(...(await claimAhead(client, limit - taken.length, ahead)));
    let held: number[] = [];
    if (taken.length > 0) {
      const next = taken.map(
        (r) =>
          new Date(
            afterClaim(
              { lastSuccessAt: r.last_success_ms, observations: null, ratePerDay: r.change_rate_per_day },
              r.now_ms,
            ),
          ),
      );
      // A row a sync is writing is waited for (its transaction is short), then read again: one it
      // moved or held since this claim read it is left out. Past HOLD_WAIT, the holds are written
      // again with the rows others are writing skipped (a row lock each, written to the WAL).
      const values = [taken.map((r) => r.subscriber_id), next, taken.map((r) => r.due_at)];
      const hold = (rowsOf: string) =>
        client.query<{ subscriber_id: number }>({
          text: `update subscriber_schedule q set leased_until = ($2::timestamptz[])[array_position($1::bigint[], q.subscriber_id)]
            where q.subscriber_id ${rowsOf} and ${UNHELD}
              and q.due_at is not distinct from ($3::timestamptz[])[array_position($1::bigint[], q.subscriber_id)]
            returning q.subscriber_id`,
          values,
        });
      await client.query(`savepoint hold; set local lock_timeout = '${HOLD_WAIT}'`);
      const { rows } = await hold('= any($1::bigint[])').catch(async (error: unknown) => {
        if ((error as { code?: string }).code !== '55P03') throw error;
        await client.query('rollback to savepoint hold');
        return hold(NOT_BEING_WRITTEN);
      });
      // Compared as text: a pool without an int8 parser hands bigints back as strings.
      const kept = new Set(rows.map((r) => String(r.subscriber_id)));
      held = taken.map((r) => r.subscriber_id).filter((id) => kept.has(String(id)));
    }
    await client.query('commit');
    return held;
  } catch (error) {
    await client.query('rollback').catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}

/**
 * Budget left over once every due row is handed out: the rows due soonest (a bounded window of the
 * index), of which `chooseAhead` picks `count`, each then read as the claim holds it. A row behind
 * its subscriber's plan is judged by that plan (it is due then).
 */
async function claimAhead(
  client: Pick<pg.PoolClient, 'query'>,
  count: number,
  ahead: Ahead,
): Promise<DueRow[]> {
  const { rows } = await client.query<{
    subscriber_id: number;
    due_ms: number;
    last_success_ms: number | null;
    now_ms: number;
  }>({
    name: 'cards-sync-claim-ahead-window',
    text: `select q.subscriber_id,
        (extract(epoch from greatest(q.due_at, s.next_refresh_at)) * 1000)::float8 as due_ms,
        (extract(epoch from s.last_success_at) * 1000)::float8 as last_success_ms,
        (extract(epoch from clock_timestamp()) * 1000)::float8 as now_ms
      from subscriber_schedule q join subscribers s on s.subscriber_id = q.subscriber_id
      where q.due_at > clock_timestamp() and ${UNHELD}
      order by q.due_at, q.subscriber_id
      limit $1`,
    values: [ahead.window(count)],
  });
  if (rows.length === 0) return [];
  const chosen = ahead.choose(
    rows.map((r) => ({ id: r.subscriber_id, dueAt: r.due_ms, lastSuccessAt: r.last_success_ms })),
    count,
    rows[0]!.now_ms,
  );
  if (chosen.length === 0) return [];
  const read = await client.query<DueRow>({
    name: 'cards-sync-claim-ahead-read',
    text: `select q.subscriber_id, q.due_at, false as behind,
        (extract(epoch from s.last_success_at) * 1000)::float8 as last_success_ms,
        s.change_rate_per_day, (extract(epoch from clock_timestamp()) * 1000)::float8 as now_ms
      from subscriber_schedule q join subscribers s on s.subscriber_id = q.subscriber_id
      where q.subscriber_id = any($1::bigint[]) and ${UNHELD}`,
    values: [chosen],
  });
  return read.rows;
}

/** How many subscribers there are: the planner's estimate on a large table, an exact count on a small one. */
export async function subscriberCount(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ estimate: number }>(
    `select greatest(reltuples, 0)::float8 as estimate from pg_class where oid = 'subscribers'::regclass`,
  );
  const estimate = rows[0]?.estimate ?? 0;
  if (estimate > SAMPLE_ABOVE) return Math.round(estimate);
  const exact = await pool.query<{ n: number }>('select count(*)::int as n from subscribers');
  return exact.rows[0]!.n;
}

/** Above this many subscribers, figures come from a sample of the table's pages. */
const SAMPLE_ABOVE = 200_000;

/** `from subscribers`, or a page sample of it big enough for about `rows` rows. */
export function sampledFrom(total: number, rows: number): string {
  if (total <= SAMPLE_ABOVE) return 'subscribers';
  const percent = Math.min(100, Math.max(0.0001, (100 * rows * 2) / total));
  return `subscribers tablesample system (${percent.toFixed(6)})`;
}

/** Subscribers drawn uniformly at random (the audit): each is as likely as any other. */
export async function randomSubscribers(pool: pg.Pool, count: number): Promise<number[]> {
  if (count <= 0) return [];
  const total = await subscriberCount(pool);
  const { rows } = await pool.query<{ subscriber_id: number }>(
    `select subscriber_id from ${sampledFrom(total, Math.max(count * 10, 1000))} order by random() limit $1`,
    [count],
  );
  return rows.map((r) => r.subscriber_id);
}

/**
 * Subscribers due now: never planned, or due (`greatest(due_at, next_refresh_at)`), and not held
 * by a claim. Two ranges of the schedule's index (nulls first, then up to now), not the table.
 */
export async function countDue(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ due: number }>(
    `select ((select count(*) from subscriber_schedule q join subscribers s using (subscriber_id)
          where q.due_at is null and (s.next_refresh_at is null or s.next_refresh_at <= now()) and ${UNHELD})
      + (select count(*) from subscriber_schedule q join subscribers s using (subscriber_id)
          where q.due_at <= now() and (s.next_refresh_at is null or s.next_refresh_at <= now()) and ${UNHELD}))::float8 as due`,
  );
  return rows[0]?.due ?? 0;
}
