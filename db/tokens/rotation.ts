import type pg from 'pg';
import type { StoredToken } from '../sync/index.js';

// `cards-sync tokens rotate`: moves every stored token under the ring's first key, in batches that
// each commit on their own (a kill loses at most the batch in flight, and a rerun continues with
// what is left). Rows a sync holds are skipped, not waited for, and picked up by the next pass.

/** A row whose token is not yet sealed under the first key. */
export interface RowToRotate {
  id: number;
  token: StoredToken;
}

/** Rows still to rotate: stored in plain text, or sealed under another key than `primaryId`. */
export async function countToRotate(pool: pg.Pool, primaryId: string): Promise<number> {
  const r = await pool.query<{ n: number }>(
    `select count(*)::int as n from saved_cards
      where card_token_fingerprint is null or not starts_with(card_token, $1)`,
    [`ct1:${primaryId}:`],
  );
  return r.rows[0]?.n ?? 0;
}

/**
 * One batch in one transaction: locks up to `limit` rows to rotate with ids above `afterId`
 * (skipping any a sync holds), asks `reseal` for each one's new stored form, writes them.
 * `reseal` returns undefined for a row it cannot read, which is left as it is.
 */
export async function rotateBatch(
  pool: pg.Pool,
  primaryId: string,
  afterId: number,
  limit: number,
  reseal: (row: RowToRotate) => StoredToken | undefined,
): Promise<{ lastId: number; seen: number; rotated: number; plain: number }> {
  const client = await pool.connect();
  try {
    await client.query('begin');
    const rows = await client.query<{
      id: number;
      card_token: string;
      card_token_fingerprint: string | null;
    }>(
      `select id, card_token, card_token_fingerprint from saved_cards
        where id > $1 and (card_token_fingerprint is null or not starts_with(card_token, $2))
        order by id limit $3 for update skip locked`,
      [afterId, `ct1:${primaryId}:`, limit],
    );
    const ids: number[] = [];
    const values: string[] = [];
    const fingerprints: (string | null)[] = [];
    let plain = 0;
    for (const r of rows.rows) {
      const sealed = reseal({
        id: r.id,
        token: { value: r.card_token, fingerprint: r.card_token_fingerprint },
      });
      if (sealed === undefined) continue;
      if (r.card_token_fingerprint === null) plain++;
      ids.push(r.id);
      values.push(sealed.value);
      fingerprints.push(sealed.fingerprint);
    }
    if (ids.length > 0) {
      await client.query(
        `update saved_cards c set card_token = u.value, card_token_fingerprint = u.fingerprint
          from unnest($1::bigint[], $2::text[], $3::text[]) as u(id, value, fingerprint)
          where c.id = u.id`,
        [ids, values, fingerprints],
      );
    }
    await client.query('commit');
    return { lastId: rows.rows.at(-1)?.id ?? afterId, seen: rows.rows.length, rotated: ids.length, plain };
  } catch (error) {
    await client.query('rollback').catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}

/** One card's stored token and owner, or undefined when no such card is stored. */
export async function readStoredToken(
  pool: pg.Pool,
  cardId: number,
): Promise<{ subscriberId: number; token: StoredToken } | undefined> {
  const r = await pool.query<{
    subscriber_id: number;
    card_token: string;
    card_token_fingerprint: string | null;
  }>('select subscriber_id, card_token, card_token_fingerprint from saved_cards where id = $1', [cardId]);
  const row = r.rows[0];
  return row === undefined
    ? undefined
    : {
        subscriberId: row.subscriber_id,
        token: { value: row.card_token, fingerprint: row.card_token_fingerprint },
      };
}
