import type pg from 'pg';

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
