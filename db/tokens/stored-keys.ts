import type pg from 'pg';

// Which keys the stored card tokens are sealed under, for the checks that compare them with the
// ring: `doctor` counts every row, a worker at start reads a sample.

/** Tokens per key (null: stored in plain text), over every row. */
export async function tokensByKey(client: pg.ClientBase): Promise<{ key: string | null; n: number }[]> {
  const { rows } = await client.query<{ key: string | null; n: number }>(
    `select case when card_token_fingerprint is null then null else split_part(card_token, ':', 2) end as key,
            count(*)::int as n
       from saved_cards group by 1`,
  );
  return rows;
}

/**
 * The keys of a sample of about 100,000 rows' worth of pages: all of a small table, a sample of a
 * large one (a whole scan could take minutes).
 */
export async function sampledTokenKeys(pool: pg.Pool): Promise<string[]> {
  const { rows } = await pool.query<{ key: string }>(
    `select distinct split_part(card_token, ':', 2) as key
           from saved_cards tablesample system ((select least(100, greatest(0.01,
             100 * 100000 / greatest(reltuples, 1)))::float4 from pg_class where oid = 'saved_cards'::regclass))
          where card_token_fingerprint is not null`,
  );
  return rows.map((r) => r.key);
}
