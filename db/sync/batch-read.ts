import type pg from 'pg';
import type { StoredCard } from './cards.js';
import { allInOrder, sentTogether } from './pipeline.js';

// The first of the write path's two round trips (see batch-write.ts): begin, lock, read.

/** A stored card and the subscriber it is expected to belong to. */
export interface CardOwner {
  id: number;
  subscriberId: number;
}

const CARD_COLUMNS = `id, subscriber_id, card_token, card_token_fingerprint, bin_number, card_family, card_bank_code, card_bank_name,
  company_id, create_date, removed_at`;

/** A `saved_cards` row as pg hands it over (int8 parsed to numbers by createDb). */
export interface CardRow {
  id: number;
  subscriber_id: number;
  card_token: string;
  card_token_fingerprint: string | null;
  bin_number: string;
  card_family: string;
  card_bank_code: number;
  card_bank_name: string;
  company_id: number;
  create_date: Date;
  removed_at: Date | null;
}

function storedCard(r: CardRow): StoredCard {
  return {
    id: r.id,
    subscriberId: r.subscriber_id,
    token: { value: r.card_token, fingerprint: r.card_token_fingerprint },
    binNumber: r.bin_number,
    cardFamily: r.card_family,
    cardBankCode: r.card_bank_code,
    cardBankName: r.card_bank_name,
    companyId: r.company_id,
    createDate: r.create_date,
    removedAt: r.removed_at,
  };
}

/**
 * A subscriber's refresh schedule as stored in `subscribers`: what the freshness policy plans its
 * next sync from (src/freshness/schedule.ts `SubscriberSchedule`, which this shape fits).
 */
interface StoredSchedule {
  /** Its last success, ms since the epoch. */
  lastSuccessAt: number | null;
  /** `change_observations`: days between successes, negative where the cards had changed (src/freshness/observation.ts). */
  observations: readonly number[] | null;
  ratePerDay: number | null;
}

interface ScheduleRow {
  subscriber_id: number;
  unchanged: boolean;
  last_success_at: Date | null;
  change_observations: number[] | null;
  change_rate_per_day: number | null;
}

export interface BatchRead {
  /** Postgres's clock when the batch's locks were held: what its rows are stamped with. */
  now: Date;
  /** When each subscriber's newest applied answer was fetched, if after this batch's answer was. */
  newest: Map<number, Date>;
  /** Subscribers whose answer's digest is the stored one: identical, none of their cards read. */
  unchanged: Set<number>;
  /** Each known subscriber's refresh schedule, as stored. */
  schedules: Map<number, StoredSchedule>;
  /** Every row of the other subscribers, plus every row whose id their answers list. */
  stored: StoredCard[];
}

/** One answer of a batch, as the read needs it. */
export interface AnswerToRead {
  subscriberId: number;
  /** Its digest (src/sync/digest.ts), compared with `subscribers.cards_digest`. */
  digest: string;
  cardIds: readonly number[];
  /** When its fetch began: only an applied answer fetched later makes it older news. */
  startedAt: Date;
}

/**
 * Begins a transaction, takes the advisory lock of every key and reads what reconciling needs, in
 * one round trip: six queries pipelined on the client, the last four prepared once per
 * connection. The locks are taken by a statement of their own, before the reads, so the reads'
 * snapshots are taken after the locks are held. Keys are locked in one order (their 64-bit
 * hashes, ascending), so two batches with overlapping keys wait for each other instead of
 * deadlocking.
 *
 * An answer whose digest equals its subscriber's `cards_digest` is identical to what is stored:
 * none of its cards is read. Only a sync of the subscriber, under the lock held here, sets that
 * digest; anything else can only clear it. So once the first read finds a digest different, the
 * later read of the cards finds it different too, and reads the cards.
 */
export async function beginLockAndRead(
  client: pg.PoolClient,
  lockKeys: readonly (number | string)[],
  answers: readonly AnswerToRead[],
): Promise<BatchRead> {
  const subs = answers.map((a) => a.subscriberId);
  const digests = answers.map((a) => a.digest);
  const cardIds = answers.flatMap((a) => a.cardIds);
  const cardOwners = answers.flatMap((a) => a.cardIds.map(() => a.subscriberId));
  const [, , lockRow, newestRows, unchangedRows, cardRows] = await allInOrder(
    sentTogether(
      client,
      () =>
        [
          client.query('begin'),
          // Every lookup of the write path has its index. A prepared statement's plan is cached
          // per connection, and one made while a table was a few pages (a first sync on a new
          // install) would scan the whole table for good once it has grown, until an ANALYZE
          // replans it (never, where autovacuum is off): a first sync of 80,000 subscribers read
          // 180M rows of `subscribers`. So the transaction plans with sequential scans off.
          client.query('set local enable_seqscan = off'),
          client.query<{ now: Date }>({
            name: 'cards-sync-lock',
            // Postgres's clock once the locks are held: the time the batch's rows are written at.
            text: `select count(pg_advisory_xact_lock(h)), clock_timestamp() as now from (
          select distinct hashtextextended(k, 0) as h from unnest($1::text[]) k order by 1
        ) ordered`,
            values: [lockKeys.map((k) => `cards-sync:subscriber:${k}`)],
          }),
          client.query<{ subscriber_id: number; started_at: Date }>({
            name: 'cards-sync-read-newest',
            // Only a success fetched after this answer was can make it older news: bounded by its
            // start, the lookup reads the ledger's newest days alone (the partitions before it are
            // pruned as the statement runs), down the (subscriber_id, started_at) index.
            text: `select s.id as subscriber_id, newest.started_at
        from unnest($1::bigint[], $2::timestamptz[]) s(id, since)
        cross join lateral (
          select started_at from sync_runs
            where subscriber_id = s.id and status = 'succeeded' and started_at > s.since
            order by started_at desc limit 1
        ) newest`,
            values: [subs, answers.map((a) => a.startedAt)],
          }),
          client.query<ScheduleRow>({
            name: 'cards-sync-read-subscribers',
            // By `= any($1)`, not a join with unnest: a plan cached while `subscribers` was small would
            // keep a hash join over a scan of the whole table (quadratic in a first large sync).
            text: `select s.subscriber_id,
          coalesce(s.cards_digest = ($2::text[])[array_position($1::bigint[], s.subscriber_id)], false) as unchanged,
          s.last_success_at, s.change_observations, s.change_rate_per_day
        from subscribers s
        where s.subscriber_id = any($1::bigint[])`,
            values: [subs, digests],
          }),
          client.query<CardRow>({
            name: 'cards-sync-read-cards',
            text: `with known as materialized (
          select subscriber_id, cards_digest from subscribers where subscriber_id = any($1::bigint[])
        ), changed as (
          select a.subscriber_id
          from unnest($1::bigint[], $2::text[]) a(subscriber_id, digest)
          left join known s on s.subscriber_id = a.subscriber_id
          where s.cards_digest is distinct from a.digest
        )
        select ${CARD_COLUMNS} from saved_cards
        where subscriber_id = any(array(select ch.subscriber_id from changed ch))
          or id = any(array(
            select l.id from unnest($3::bigint[], $4::bigint[]) l(id, subscriber_id)
            join changed ch on ch.subscriber_id = l.subscriber_id))`,
            values: [subs, digests, cardIds, cardOwners],
          }),
        ] as const,
    ),
  );
  const newest = new Map<number, Date>();
  for (const r of newestRows.rows) newest.set(r.subscriber_id, r.started_at);
  const unchanged = new Set(unchangedRows.rows.filter((r) => r.unchanged).map((r) => r.subscriber_id));
  const schedules = new Map<number, StoredSchedule>();
  for (const r of unchangedRows.rows) {
    schedules.set(Number(r.subscriber_id), {
      lastSuccessAt: r.last_success_at?.getTime() ?? null,
      observations: r.change_observations,
      ratePerDay: r.change_rate_per_day,
    });
  }
  return { now: lockRow.rows[0]!.now, newest, unchanged, schedules, stored: cardRows.rows.map(storedCard) };
}

/**
 * Locks cards owned by subscribers outside the batch (cards moving to one of its subscribers) and
 * reads them again, as they are once any transaction that held them has committed. The batch's
 * advisory locks do not cover those owners: without this, a sync of the old owner could mark the
 * card removed between the read and the write, and the move would record that removal a second
 * time. Ids ascending, so two batches lock shared cards in one order.
 */
export async function lockAndReread(
  client: pg.PoolClient,
  cardIds: readonly number[],
): Promise<StoredCard[]> {
  const result = await client.query<CardRow>(
    `select ${CARD_COLUMNS} from saved_cards where id = any($1::bigint[]) order by id for update`,
    [[...cardIds]],
  );
  return result.rows.map(storedCard);
}

/** What reconciling one subscriber would read, outside any transaction and without a lock (`sync --dry-run`). */
export async function readStoredCards(
  pool: pg.Pool,
  subscriberId: number,
  cardIds: readonly number[],
): Promise<StoredCard[]> {
  const result = await pool.query<CardRow>(
    `select ${CARD_COLUMNS} from saved_cards where subscriber_id = $1 or id = any($2::bigint[]) order by id`,
    [subscriberId, [...cardIds]],
  );
  return result.rows.map(storedCard);
}
