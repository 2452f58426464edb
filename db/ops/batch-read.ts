import type pg from 'pg';
import type { StoredCard } from '../../src/sync/reconcile.js';

// The first of the write path's three round trips (see batch-write.ts): begin, lock, read.

/** A stored card and the subscriber it is expected to belong to. */
export interface CardOwner {
  id: number;
  subscriberId: number;
}

/** Integers only ever reach SQL text through here. */
function integerList(values: readonly number[]): string {
  for (const v of values) {
    if (!Number.isSafeInteger(v)) throw new TypeError('an id for SQL text is not a safe integer');
  }
  return `'{${values.join(',')}}'`;
}

export interface BatchRead {
  /** When each subscriber's newest applied answer was fetched (absent: none yet). */
  newest: Map<number, Date>;
  /** Every row of the subscribers, plus every row whose id the answers list. */
  stored: StoredCard[];
}

/**
 * Begins a transaction, takes the advisory lock of every key and reads what reconciling needs,
 * in one round trip (a simple-protocol query of several statements). The locks come first and
 * alone in their statement, so the reads' snapshot is taken after they are held. Keys are locked
 * in one order (their 64-bit hashes, ascending), so two batches with overlapping keys wait for
 * each other instead of deadlocking. Only integers and escaped lock keys are put in the text, never
 * a card value.
 */
export async function beginLockAndRead(
  client: pg.PoolClient,
  lockKeys: readonly (number | string)[],
  subscriberIds: readonly number[],
  cardIds: readonly number[],
): Promise<BatchRead> {
  const keys = lockKeys.map((k) => client.escapeLiteral(`cards-sync:subscriber:${k}`)).join(',');
  const subs = integerList(subscriberIds);
  const ids = integerList(cardIds);
  const results = (await client.query(`
    begin;
    select count(pg_advisory_xact_lock(h)) from (
      select distinct hashtextextended(k, 0) as h from unnest(array[${keys}]::text[]) k order by 1
    ) ordered;
    select s.id as subscriber_id, newest.started_at
      from unnest(${subs}::bigint[]) s(id)
      cross join lateral (
        -- Newest first down the (subscriber_id, started_at) index: one or two rows read, however
        -- many runs the subscriber has had.
        select started_at from sync_runs
          where subscriber_id = s.id and status = 'succeeded'
          order by started_at desc limit 1
      ) newest;
    select id, subscriber_id, card_token, bin_number, card_family, card_bank_code, card_bank_name,
        company_id, create_date, removed_at
      from saved_cards
      where subscriber_id = any(${subs}::bigint[]) or id = any(${ids}::bigint[]);
  `)) as unknown as pg.QueryResult[];
  const newest = new Map<number, Date>();
  for (const r of results[2]!.rows) newest.set(r.subscriber_id, r.started_at);
  const stored: StoredCard[] = results[3]!.rows.map((r) => ({
    id: r.id,
    subscriberId: r.subscriber_id,
    cardToken: r.card_token,
    binNumber: r.bin_number,
    cardFamily: r.card_family,
    cardBankCode: r.card_bank_code,
    cardBankName: r.card_bank_name,
    companyId: r.company_id,
    createDate: r.create_date,
    removedAt: r.removed_at,
  }));
  return { newest, stored };
}
