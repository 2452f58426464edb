import type pg from 'pg';
import { createDb } from '../../db/client.js';
import { closeRefreshRun } from '../../db/refresh/runs.js';
import { median } from './measure.js';
import { COLUMNS } from './sql.js';

// The ledger bench's reads: an as-of query of one wallet a day ago, and the tally of a refresh
// run by the product's own close, each the median of 21 runs.

/** Both reads' medians on the ledgers as loaded, printed under `label`. */
export async function queries(pool: pg.Pool, url: string, label: string) {
  const handle = createDb(url, { max: 2 });
  // A refresh run of 100,000 syncs written now, tallied by the product's own close.
  const { rows } = await pool.query<{ id: string }>(
    `insert into refresh_runs (trigger, status, started_at, subscribers_total, prior_sync_run_id)
     values ('manual', 'running', now(), 100000, coalesce(pg_sequence_last_value('sync_runs_id_seq'), 0)) returning id`,
  );
  const run = Number(rows[0]!.id);
  await pool.query(
    `insert into sync_runs (${COLUMNS}) select s, 'nightly', null, $1, now(), now(), 'succeeded', 5, 0, 0, 5, 0, 0, null, null
     from generate_series(1, 100000) s`,
    [run],
  );
  await pool.query('analyze sync_runs');
  const tally = await median(async () => {
    await pool.query(`update refresh_runs set status = 'running' where id = $1`, [run]);
    await closeRefreshRun(handle.db, run);
  });
  const asOf = await median(() =>
    pool.query(`select * from saved_cards_as_of(now() - interval '1 day', 42)`).then((r) => {
      if (r.rows.length !== 5) throw new Error(`as-of returned ${r.rows.length} cards`);
    }),
  );
  await handle.close();
  console.log(
    `${label}: as-of (one wallet, a day ago) median ${asOf.toFixed(2)} ms; tally of a 100,000-sync run median ${tally.toFixed(0)} ms`,
  );
  return { asOfMs: asOf, tallyMs: tally };
}
