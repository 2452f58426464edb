import type pg from 'pg';

// Due times moved by a new plan rather than by a sync: plans made under a longer REFRESH_MAX_AGE
// (due times days out) pulled in to the new bound, subscribers seen once pulled in to the
// population's rate, and a plan going round in turn after a mass change putting everyone in turn. Nothing
// else would move them before they fall due.

/** Rows one statement moves: a short transaction each, whatever the fleet's size. */
const BATCH = 5000;

/**
 * Pulls every due time later than now + `capMs` in to at most the subscriber's last success +
 * `capMs` (at most now + `capMs`), and the subscriber's own plan (`next_refresh_at`) with it, or
 * the claim would catch the row up to that plan again (db/refresh/schedule.ts `BEHIND`). The
 * last successes spread the new due times the way the syncs were spread, instead of one second.
 * Reads the range `due_at > now + cap` of `subscriber_schedule_due_idx`: nothing to read when
 * every plan is within the bound. Rows a sync is writing are left for the next call; a claim's
 * hold is shortened by {@link capHolds}.
 * Returns how many it moved.
 */
export async function capDueTimes(pool: pg.Pool, capMs: number, batch = BATCH): Promise<number> {
  let moved = 0;
  for (;;) {
    const { rows } = await pool.query<{ n: number }>({
      name: 'cards-sync-schedule-cap',
      text: `with bound as (select now() + make_interval(secs => $1::float8 / 1000) as at),
        picked as (
          select q.subscriber_id,
              least(coalesce(s.last_success_at + make_interval(secs => $1::float8 / 1000), b.at), b.at) as due
            from subscriber_schedule q join subscribers s using (subscriber_id), bound b
            where q.due_at > b.at
            order by q.due_at, q.subscriber_id
            limit $2
            for update of q skip locked
        ),
        plans as (
          update subscribers s set next_refresh_at = p.due from picked p
            where s.subscriber_id = p.subscriber_id and s.next_refresh_at > p.due
        ),
        rows as (update subscriber_schedule q set due_at = p.due from picked p where q.subscriber_id = p.subscriber_id)
        select count(*)::int as n from picked`,
      values: [capMs, batch],
    });
    const n = rows[0]?.n ?? 0;
    moved += n;
    if (n < batch) return moved;
  }
}

/**
 * Pulls the due time of every subscriber seen once (synced, no observation of its own yet) that is
 * planned later than its last success + `intervalMs` in to that (at the earliest now), with its own
 * plan: a new plan's population rate asks sooner than the one it was planned under (or none was
 * made when it was synced). Called only when that interval shrinks, so its read of the schedule's
 * future (every row due later than now) is rare. Returns how many it moved.
 */
export async function pullInSeenOnce(pool: pg.Pool, intervalMs: number, batch = BATCH): Promise<number> {
  let moved = 0;
  for (;;) {
    const { rows } = await pool.query<{ n: number }>({
      name: 'cards-sync-schedule-seen-once',
      text: `with picked as (
          select q.subscriber_id,
              greatest(now(), s.last_success_at + make_interval(secs => $1::float8 / 1000)) as due
            from subscriber_schedule q join subscribers s using (subscriber_id)
            where q.due_at > now() and s.last_success_at is not null
              and coalesce(cardinality(s.change_observations), 0) = 0
              and q.due_at > greatest(now(), s.last_success_at + make_interval(secs => $1::float8 / 1000))
            order by q.due_at, q.subscriber_id
            limit $2
            for update of q skip locked
        ),
        plans as (
          update subscribers s set next_refresh_at = p.due from picked p
            where s.subscriber_id = p.subscriber_id and s.next_refresh_at > p.due
        ),
        rows as (update subscriber_schedule q set due_at = p.due from picked p where q.subscriber_id = p.subscriber_id)
        select count(*)::int as n from picked`,
      values: [intervalMs, batch],
    });
    const n = rows[0]?.n ?? 0;
    moved += n;
    if (n < batch) return moved;
  }
}

/**
 * Puts every due time sooner than its subscriber's last success + `roundMs` back to that: a plan
 * going round in turn because its own syncs found nearly everything changed (src/freshness/schedule.ts
 * `pullIn`) takes the copies in the order they were last synced, where due times its rates planned
 * short would put a wallet synced seconds ago ahead of every copy synced before a mass change. The
 * new due times are not held to now: overdue rows keep the order of their last successes. The
 * subscriber's own plan (`next_refresh_at`) is left as its sync wrote it: a plan sooner than the due
 * time is not caught up to (db/refresh/schedule.ts `BEHIND`), and leaving the wide row alone keeps
 * the locks in the order a sync takes them (its row, then the schedule's, by the trigger). Rows held
 * by a claim are left to their sync, never-synced rows keep their place at the front, and rows
 * another transaction is writing are skipped. Which rows were planned short is known only row by
 * row, so this reads the whole schedule, a batch of ids at a time (keyset on the primary key,
 * whatever it moves). A due time within a millisecond of the round is in turn already: a sync plans
 * to the fraction of a millisecond, `due_at` holds whole ones. Returns how many it moved.
 */
export async function dueInTurn(pool: pg.Pool, roundMs: number, batch = BATCH): Promise<number> {
  let moved = 0;
  let after = 0;
  for (;;) {
    const { rows } = await pool.query<{ n: number; last: string | null }>({
      name: 'cards-sync-schedule-in-turn',
      text: `with span as (
          select subscriber_id from subscriber_schedule where subscriber_id > $3
            order by subscriber_id limit $2
        ),
        picked as (
          select q.subscriber_id, s.last_success_at + make_interval(secs => $1::float8 / 1000) as due
            from subscriber_schedule q join subscribers s using (subscriber_id)
            where q.subscriber_id in (select subscriber_id from span) and s.last_success_at is not null
              and q.due_at < s.last_success_at + make_interval(secs => $1::float8 / 1000) - interval '1 millisecond'
              and (q.leased_until is null or q.leased_until <= now())
            for update of q skip locked
        ),
        rows as (update subscriber_schedule q set due_at = p.due from picked p where q.subscriber_id = p.subscriber_id)
        select (select count(*)::int from picked) as n, (select max(subscriber_id)::text from span) as last`,
      values: [roundMs, batch, after],
    });
    moved += rows[0]?.n ?? 0;
    const last = rows[0]?.last ?? null;
    if (last === null) return moved;
    after = Number(last);
  }
}

/**
 * Shortens every claim's hold that would run past now + `capMs` to end then (migration 0037: a
 * hold is the claim's next-due time under the max age it was made under, days at a long one). Its
 * sync ends a hold long before; this is for the hold of a job lost or failing, which would otherwise
 * keep its subscriber past a lowered REFRESH_MAX_AGE. Holds are not indexed (that is what keeps a
 * claim's write HOT), so this reads the whole table: call it when the max age is lowered, not at
 * every plan. Returns how many it shortened.
 */
export async function capHolds(pool: pg.Pool, capMs: number): Promise<number> {
  const { rowCount } = await pool.query(
    `update subscriber_schedule set leased_until = now() + make_interval(secs => $1::float8 / 1000)
      where leased_until > now() + make_interval(secs => $1::float8 / 1000)`,
    [capMs],
  );
  return rowCount ?? 0;
}
