import type pg from 'pg';
import type { ChangeEventType } from '../schema/index.js';

// The pull feed's statements (src/events/feed.ts pages with them; docs/events.md): events in
// (txid, seq) order, showing only the events of transactions older than every transaction still
// running. A cursor comes in as its two parts, decimal text.

type Queryable = Pick<pg.Pool, 'query'> | Pick<pg.ClientBase, 'query'>;

// The horizon: the oldest transaction still running in this database, by the reader's snapshot
// (its xmax when none runs). Transactions of other databases on the server never write here, so
// they do not hold the feed back; one whose database is unknown (it ended since the snapshot, or
// its row is not visible) is taken as this database's, which only delays.
const HORIZON = `horizon as materialized (
  select coalesce(
    (select min(x) from pg_snapshot_xip(pg_current_snapshot()) x
      where not exists (select 1 from pg_stat_activity a
        where a.backend_xid = x::xid and a.datid is not null
          and a.datid <> (select oid from pg_database where datname = current_database()))),
    pg_snapshot_xmax(pg_current_snapshot())) as xmin
)`;

const READ = `
with ${HORIZON}
select e.id, e.seq::text as seq, e.txid::text as txid, e.created_at, e.type, e.payload,
  e.tracingspancontext
from change_events e, horizon h
where e.txid < h.xmin and (e.txid, e.seq) > ($1::xid8, $2::bigint)
order by e.txid, e.seq
limit $3`;

// Events past the cursor that the horizon still holds back (a transaction older than theirs is
// running): a long poll looks again soon rather than wait for a notification.
const HELD_BACK = `
with ${HORIZON}
select exists (
  select 1 from change_events, horizon h
  where txid >= h.xmin and (txid, seq) > ($1::xid8, $2::bigint)
) as held`;

// Every cursor the feed gives is an event's, whose transaction had ended when it was read, or
// FEED_START: its transaction id is below the xmax of every snapshot taken since, and the xmax of
// a snapshot never goes back (unlike the horizon, which leaves out other databases' transactions
// by what pg_stat_activity shows). So a cursor at or past (xmax, 0) can only come from elsewhere,
// while one a reader was given stays good when retention has dropped every event since. A seq is
// never 0, so (xmax, 0) itself skips nothing. Its transaction id is not asked for: a reader does
// not get one.
const AHEAD = `
select ($1::xid8, $2::bigint) >= (pg_snapshot_xmax(pg_current_snapshot()), 1::bigint) as ahead`;

// The head a refused cursor is told of: the newest event a reader sees now, or, with none, the
// horizon (every transaction below it has ended, so a reader from there misses no new event).
const HEAD = `
with ${HORIZON}
select (select e.txid::text || '-' || e.seq::text from change_events e
          where e.txid < h.xmin order by e.txid desc, e.seq desc limit 1) as last,
       h.xmin::text || '-0' as horizon
from horizon h`;

/** Whether a cursor lies past every place this database's feed can have given (see AHEAD). */
export async function cursorAhead(db: Queryable, txid: string, seq: string): Promise<boolean> {
  const { rows } = await db.query<{ ahead: boolean }>(AHEAD, [txid, seq]);
  return rows[0]?.ahead === true;
}

/** The feed's head (see HEAD): its newest visible event's cursor (`last`), else the horizon's. */
export async function feedHeadRow(db: Queryable): Promise<{ last: string | null; horizon: string }> {
  return (await db.query<{ last: string | null; horizon: string }>(HEAD)).rows[0]!;
}

/** One event as the feed's statement reads it. */
export interface FeedRow {
  id: string;
  seq: string;
  txid: string;
  created_at: Date;
  type: ChangeEventType;
  payload: Record<string, unknown>;
  tracingspancontext: string | null;
}

/** Up to `limit` visible events after the cursor (txid, seq), in feed order (a prepared statement). */
export async function readFeedRows(
  db: Queryable,
  txid: string,
  seq: string,
  limit: number,
): Promise<FeedRow[]> {
  const { rows } = await db.query<FeedRow>({
    name: 'cards-sync-read-feed',
    text: READ,
    values: [txid, seq, limit],
  });
  return rows;
}

/** Whether events after the cursor (txid, seq) exist that the horizon still holds back. */
export async function feedHeldBackAfter(db: Queryable, txid: string, seq: string): Promise<boolean> {
  const { rows } = await db.query<{ held: boolean }>(HELD_BACK, [txid, seq]);
  return rows[0]?.held === true;
}

/** How many change events committed after the feed's place `(txid, seq)` (a cursor's two parts). */
export async function countEventsAfter(
  pool: pg.Pool,
  cursor: { txid: string; seq: string },
): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    'select count(*)::int as n from change_events where (txid, seq) > ($1::xid8, $2::bigint)',
    [cursor.txid, cursor.seq],
  );
  return rows[0]?.n ?? 0;
}
