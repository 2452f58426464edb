import { compactClosedDays } from '../db/ledger/partitions.js';
import { databaseFlag, parseFlags, resetDatabase, seedingPool, wholeNumber } from './harness.js';
import { conversion } from './ledger/conversion.js';
import { sec, sizes, timed } from './ledger/measure.js';
import { queries } from './ledger/queries.js';
import { retention } from './ledger/retention.js';
import { COLUMNS, PLAIN_LEDGER, runsOf } from './ledger/sql.js';

// The ledger at scale, generated in SQL.   npm run bench:ledger
//
//   1. bytes per run: the partitioned sync_runs against the previous release's plain table
//      (`sync_runs_before`: the same columns, its primary key and B-trees), the same rows in both;
//   2. an as-of query and a refresh run's tally, after 5M runs and again after all of them;
//   3. retention of the oldest day: DELETE on the plain table against dropping the partition, with
//      a writer inserting a run every 2 ms meanwhile (its longest insert is how long a sync was held);
//   4. the conversion of a ledger of the previous release (10M runs) by `migrate`, with the same
//      writer: how long syncs were held, in all and at once.
//
// This file reads the flags, loads both ledgers and measures their sizes; the SQL that makes them
// is in bench/ledger/sql.ts, the reads in queries.ts, retention in retention.ts, the conversion in
// conversion.ts, and what they measure with in measure.ts and writer.ts.
const { values } = parseFlags({
  options: {
    'runs-per-day': { type: 'string', default: '8600000' },
    days: { type: 'string', default: '6' },
    /** Runs in the ledger converted by migrate (0 skips the conversion). */
    'convert-runs': { type: 'string', default: '10000000' },
    ...databaseFlag('cards_sync_bench_ledger'),
  },
});
const perDay = wholeNumber('runs-per-day', values['runs-per-day'], 1000);
const days = wholeNumber('days', values.days, 2);
const convertRuns = wholeNumber('convert-runs', values['convert-runs'], 0);
const url = values['database-url']!;
const CHUNK = 1_000_000;

async function main() {
  await resetDatabase(url);
  const pool = seedingPool(url, 4);
  await pool.query(PLAIN_LEDGER);
  const { rows: t } = await pool.query<{ start: Date }>(
    `select (date_trunc('day', now() at time zone 'UTC') - make_interval(days => $1)) at time zone 'UTC' as start`,
    [days],
  );
  const start = t[0]!.start;
  for (let d = 0; d < days; d++) {
    await pool.query('select sync_runs_add_partition($1::date)', [
      new Date(start.getTime() + d * 86_400_000).toISOString().slice(0, 10),
    ]);
  }
  // One wallet whose cards were seen today: its as-of a day ago reads the ledger for its last run.
  await pool.query(
    `
    insert into saved_cards (id, subscriber_id, card_token, bin_number, card_family, card_bank_code, card_bank_name,
      company_id, create_date, first_seen_at, last_seen_at, updated_at)
    select 900000 + k, 42, 't', '4506-xxxx-xxxx-2901', 'Axess', 1, 'AKBANK', 1, now(), $1, now(), $1
    from generate_series(1, 5) k`,
    [start],
  );
  await pool.query(
    `insert into saved_card_changes (card_id, subscriber_id, change, changed_at)
    select 900000 + k, 42, 'added', $1 from generate_series(1, 5) k`,
    [start],
  );
  await pool.query(`insert into subscribers (subscriber_id, last_success_at) values (42, now())`);

  // Phase 1: a tenth of every day (5M at the defaults); phase 2: the rest.
  const results: Record<string, unknown> = { runsPerDay: perDay, days };
  let loaded = 0;
  for (const [lo, hi, label] of [
    [0, Math.floor(perDay / 10), 'after a tenth'],
    [Math.floor(perDay / 10), perDay, 'after all'],
  ] as const) {
    const [, ms] = await timed(async () => {
      for (let d = 0; d < days; d++) {
        const dayStart = new Date(start.getTime() + d * 86_400_000);
        for (let a = lo; a < hi; a += CHUNK) {
          const b = Math.min(hi, a + CHUNK);
          await pool.query(`insert into sync_runs (${COLUMNS}) ${runsOf(a, b, d, perDay)}`, [
            dayStart,
            86_400,
          ]);
          await pool.query(
            `insert into sync_runs_before (${COLUMNS}) ${runsOf(a, b, d, perDay, 'previous')}`,
            [dayStart, 86_400],
          );
        }
      }
    });
    loaded += (hi - lo) * days;
    await pool.query('vacuum analyze sync_runs_before');
    await pool.query('vacuum analyze sync_runs');
    console.log(`loaded ${loaded.toLocaleString('en')} runs into each ledger in ${sec(ms)}`);
    results[label] = { runs: loaded, ...(await queries(pool, url, `${loaded.toLocaleString('en')} runs`)) };
  }

  // 1. Bytes per run, once the upkeep has closed the days that ended (as every hour in a worker).
  const open = await sizes(pool);
  const [closedDays, closeMs] = await timed(() => compactClosedDays(pool, { limit: days + 1 }));
  console.log(`closed ${closedDays.length} days (indexes packed) in ${sec(closeMs)}`);
  const s = await sizes(pool);
  results.bytesPerRunBeforeClosing = (open.partitioned!.heap + open.partitioned!.idx) / open.partitioned!.n;
  const per = (x: { heap: number; idx: number; n: number }) => ({
    heap: x.heap / x.n,
    idx: x.idx / x.n,
    total: (x.heap + x.idx) / x.n,
  });
  const now = per(s.partitioned!);
  const before = per(s.before!);
  console.log(
    `bytes per run: partitioned ${now.total.toFixed(1)} (heap ${now.heap.toFixed(1)}, indexes ${now.idx.toFixed(1)}); ` +
      `before ${before.total.toFixed(1)} (heap ${before.heap.toFixed(1)}, indexes ${before.idx.toFixed(1)}); ` +
      `ratio ${(now.total / before.total).toFixed(3)} (target <= 0.60)`,
  );
  results.bytesPerRun = { partitioned: now, before, ratio: now.total / before.total };

  // 3. Retention of the oldest day, both ways.
  results.retention = await retention(pool, url, start);
  await pool.end();

  // 4. Converting a ledger of the previous release.
  if (convertRuns > 0) results.conversion = await conversion(url, convertRuns);
  console.log(JSON.stringify(results));
}

await main();
