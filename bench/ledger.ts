import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { createDb } from '../db/client.js';
import { compactClosedDays, dropExpiredPartitions } from '../db/ledger/partitions.js';
import { migrationsFolder, runMigrations } from '../db/migrate.js';
import { closeRefreshRun } from '../db/ops/refresh-runs.js';
import { parseFlags, resetDatabase, wholeNumber } from './harness.js';

// The ledger at scale (issue 28), generated in SQL.   npm run bench:ledger
//
//   1. bytes per run: the partitioned sync_runs against the previous release's plain table
//      (`sync_runs_before`: the same columns, its primary key and B-trees), the same rows in both;
//   2. an as-of query and a refresh run's tally, after 5M runs and again after all of them;
//   3. retention of the oldest day: DELETE on the plain table against dropping the partition, with
//      a writer inserting a run every 2 ms meanwhile (its longest insert is how long a sync was held);
//   4. the conversion of a ledger of the previous release (10M runs) by `migrate`, with the same
//      writer: how long syncs were held, in all and at once.
const { values } = parseFlags({
  options: {
    'runs-per-day': { type: 'string', default: '8600000' },
    days: { type: 'string', default: '6' },
    /** Runs in the ledger converted by migrate (0 skips the conversion). */
    'convert-runs': { type: 'string', default: '10000000' },
    'database-url': {
      type: 'string',
      default: 'postgres://postgres:postgres@127.0.0.1:5432/cards_sync_bench_ledger',
    },
  },
});
const perDay = wholeNumber('runs-per-day', values['runs-per-day'], 1000);
const days = wholeNumber('days', values.days, 2);
const convertRuns = wholeNumber('convert-runs', values['convert-runs'], 0);
const url = values['database-url']!;
const CHUNK = 1_000_000;
const SUBSCRIBERS = 1_000_000;

const COLUMNS = `subscriber_id, trigger, job_id, refresh_run_id, started_at, finished_at, status, cards_seen,
  inserted, updated, unchanged, removed, restored, error_code, error_message`;
/** Runs number lo..hi-1 of day `d` (0 = the oldest) of `n` a day, spread evenly over the day: as continuous mode writes them. */
const runsOf = (lo: number, hi: number, d: number, n = perDay, release: 'this' | 'previous' = 'this') => `
  select s, case when g % 50 = 0 then 'audit' else 'refresh' end,
    -- This release keeps no job id for an unchanged success; the previous one kept every one.
    case when ${release === 'this'} and g % 100 <> 7 and g % 97 <> 3 then null
      else 'id:' || s || ':' || to_hex(g::bigint * 1000003) end,
    case when g % 50 = 0 then null else ${1000 + d} end, t, t + interval '40 ms',
    case when g % 100 = 7 then 'failed' else 'succeeded' end, 5, 0, (g % 97 = 3)::int, 5 - (g % 97 = 3)::int, 0, 0,
    case when g % 100 = 7 then 'timeout' end, case when g % 100 = 7 then 'the API did not answer within 10000 ms' end
  from (select g, (hashint4(g::int) & 1048575) % ${SUBSCRIBERS} + 1 as s,
          $1::timestamptz + (g - ${d * n}) * ($2::float8 / ${n}) * interval '1 second' as t
        from generate_series(${d * n + lo}, ${d * n + hi - 1}) g) x`;

const PLAIN_LEDGER = `
  create table sync_runs_before (
    id bigint generated always as identity primary key, subscriber_id bigint, email text, trigger text not null,
    job_id text, refresh_run_id bigint, started_at timestamptz not null, finished_at timestamptz not null,
    status text not null, cards_seen integer default 0 not null, inserted integer default 0 not null,
    updated integer default 0 not null, unchanged integer default 0 not null, removed integer default 0 not null,
    restored integer default 0 not null, error_code text, error_message text);
  create index sync_runs_before_subscriber_started_idx on sync_runs_before (subscriber_id, started_at);
  create index sync_runs_before_started_at_idx on sync_runs_before (started_at);
  create index sync_runs_before_audit_idx on sync_runs_before (started_at) where trigger = 'audit'`;

const sec = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
const mb = (b: number) => `${(b / 1e6).toFixed(1)} MB`;

async function lsn(c: pg.Pool): Promise<string> {
  return (await c.query<{ l: string }>('select pg_current_wal_lsn()::text as l')).rows[0]!.l;
}
async function walSince(c: pg.Pool, from: string): Promise<number> {
  return Number(
    (await c.query<{ b: string }>('select pg_wal_lsn_diff(pg_current_wal_lsn(), $1) as b', [from])).rows[0]!
      .b,
  );
}

/** Inserts one run every 2 ms into `table` until stopped; reports its inserts' latencies. */
function startWriter(databaseUrl: string, table: string) {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: 'bench writer' });
  const latencies: number[] = [];
  let stop = false;
  const done = (async () => {
    await client.connect();
    while (!stop) {
      const t0 = performance.now();
      await client.query(
        `insert into ${table} (subscriber_id, trigger, started_at, finished_at, status) values (1, 'manual', now(), now(), 'succeeded')`,
      );
      latencies.push(performance.now() - t0);
      await new Promise((r) => setTimeout(r, 2));
    }
    await client.end();
  })();
  return {
    async stop() {
      stop = true;
      await done;
      const sorted = [...latencies].sort((a, b) => a - b);
      const median = sorted[Math.floor(sorted.length / 2)] ?? 0;
      return {
        inserts: latencies.length,
        medianMs: median,
        maxMs: sorted.at(-1) ?? 0,
        /** Time the writer spent beyond its usual insert, in inserts that took over 20 ms. */
        heldMs: latencies.filter((l) => l > 20).reduce((s, l) => s + l - median, 0),
      };
    },
  };
}

async function sizes(pool: pg.Pool) {
  const { rows } = await pool.query<{ which: string; heap: string; idx: string; n: string }>(`
    select 'partitioned' as which, sum(pg_relation_size(i.inhrelid)) as heap,
      sum(pg_indexes_size(i.inhrelid)) as idx, (select count(*) from sync_runs) as n
    from pg_inherits i where i.inhparent = 'sync_runs'::regclass
    union all
    select 'before', pg_relation_size('sync_runs_before'), pg_indexes_size('sync_runs_before'),
      (select count(*) from sync_runs_before)`);
  return Object.fromEntries(
    rows.map((r) => [r.which, { heap: Number(r.heap), idx: Number(r.idx), n: Number(r.n) }]),
  );
}

async function timed<T>(f: () => Promise<T>): Promise<[T, number]> {
  const t0 = performance.now();
  const r = await f();
  return [r, performance.now() - t0];
}

/** The median of 21 runs of `f`, in ms. */
async function median(f: () => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < 21; i++) times.push((await timed(f))[1]);
  return times.sort((a, b) => a - b)[10]!;
}

async function queries(pool: pg.Pool, label: string) {
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

async function main() {
  await resetDatabase(url);
  const pool = new pg.Pool({ connectionString: url, max: 4 });
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
          await pool.query(`insert into sync_runs (${COLUMNS}) ${runsOf(a, b, d)}`, [dayStart, 86_400]);
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
    results[label] = { runs: loaded, ...(await queries(pool, `${loaded.toLocaleString('en')} runs`)) };
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
  const boundary = new Date(start.getTime() + 86_400_000);
  const { rows: age } = await pool.query<{ d: number }>(
    `select floor(extract(epoch from now() - $1::timestamptz) / 86400)::int as d`,
    [boundary],
  );
  const retentionDays = age[0]!.d;
  await pool.query('checkpoint');
  let writer = startWriter(url, 'sync_runs');
  await new Promise((r) => setTimeout(r, 500));
  let from = await lsn(pool);
  const sizeBefore = (await sizes(pool)).partitioned!;
  const [dropped, dropMs] = await timed(() => dropExpiredPartitions(pool, retentionDays));
  const dropWal = await walSince(pool, from);
  await new Promise((r) => setTimeout(r, 500));
  const dropWriter = await writer.stop();
  const sizeAfter = (await sizes(pool)).partitioned!;
  console.log(
    `retention by partition: dropped ${dropped.map((d) => `${d.name} (~${d.estimatedRows.toLocaleString('en')} runs)`).join(', ')} ` +
      `in ${dropMs.toFixed(1)} ms, WAL ${(dropWal / 1024).toFixed(1)} KB (the writer's inserts included), ` +
      `ledger ${mb(sizeBefore.heap + sizeBefore.idx)} -> ${mb(sizeAfter.heap + sizeAfter.idx)}; ` +
      `writer: ${dropWriter.inserts} inserts, longest ${dropWriter.maxMs.toFixed(1)} ms (median ${dropWriter.medianMs.toFixed(2)})`,
  );
  await pool.query('checkpoint');
  writer = startWriter(url, 'sync_runs_before');
  await new Promise((r) => setTimeout(r, 500));
  from = await lsn(pool);
  const plainBefore = (await sizes(pool)).before!;
  const [deleted, deleteMs] = await timed(() =>
    pool.query('delete from sync_runs_before where started_at < $1', [boundary]).then((r) => r.rowCount ?? 0),
  );
  const deleteWal = await walSince(pool, from);
  const deleteWriter = await writer.stop();
  const plainAfter = (await sizes(pool)).before!;
  const dead = await pool.query<{ n: string }>(
    `select n_dead_tup as n from pg_stat_user_tables where relname = 'sync_runs_before'`,
  );
  console.log(
    `retention by DELETE: ${deleted.toLocaleString('en')} runs in ${sec(deleteMs)}, WAL ${mb(deleteWal)}, ` +
      `table ${mb(plainBefore.heap + plainBefore.idx)} -> ${mb(plainAfter.heap + plainAfter.idx)} with ~${Number(dead.rows[0]!.n).toLocaleString('en')} dead rows; ` +
      `writer: ${deleteWriter.inserts} inserts, longest ${deleteWriter.maxMs.toFixed(1)} ms (median ${deleteWriter.medianMs.toFixed(2)})`,
  );
  results.retention = {
    partition: {
      ms: dropMs,
      walBytes: dropWal,
      bytesBefore: sizeBefore.heap + sizeBefore.idx,
      bytesAfter: sizeAfter.heap + sizeAfter.idx,
      writer: dropWriter,
    },
    delete: {
      rows: deleted,
      ms: deleteMs,
      walBytes: deleteWal,
      bytesBefore: plainBefore.heap + plainBefore.idx,
      bytesAfter: plainAfter.heap + plainAfter.idx,
      deadRows: Number(dead.rows[0]!.n),
      writer: deleteWriter,
    },
  };
  await pool.end();

  // 4. Converting a ledger of the previous release.
  if (convertRuns > 0) results.conversion = await conversion();
  console.log(JSON.stringify(results));
}

async function conversion() {
  const convertUrl = url.replace(/\/([^/]+)$/, '/$1_convert');
  const admin = new pg.Client({ connectionString: convertUrl.replace(/\/[^/]+$/, '/postgres') });
  await admin.connect();
  await admin.query(`drop database if exists "${new URL(convertUrl).pathname.slice(1)}" with (force)`);
  await admin.end();
  const folder = releaseBefore('0019_ledger_partitions');
  await runMigrations(convertUrl, { folder });
  rmSync(folder, { recursive: true, force: true });
  const pool = new pg.Pool({ connectionString: convertUrl, max: 2 });
  const span = 90 * 86_400;
  const per = Math.ceil(convertRuns / 10);
  const [, loadMs] = await timed(async () => {
    for (let a = 0; a < convertRuns; a += per) {
      const b = Math.min(convertRuns, a + per);
      await pool.query(`insert into sync_runs (${COLUMNS}) ${runsOf(a, b, 0, convertRuns)}`, [
        new Date(Date.now() - span * 1000),
        span,
      ]);
    }
    await pool.query('vacuum analyze sync_runs');
  });
  console.log(
    `conversion: a ledger of ${convertRuns.toLocaleString('en')} runs (previous release) loaded in ${sec(loadMs)}`,
  );
  const writer = startWriter(convertUrl, 'sync_runs');
  await new Promise((r) => setTimeout(r, 1000));
  const [, migrateMs] = await timed(() => runMigrations(convertUrl));
  await new Promise((r) => setTimeout(r, 1000));
  const held = await writer.stop();
  const { rows } = await pool.query<{ n: string }>('select count(*) as n from sync_runs');
  await pool.end();
  console.log(
    `conversion: migrate took ${sec(migrateMs)}; the writer's longest insert ${held.maxMs.toFixed(0)} ms, ` +
      `held ${held.heldMs.toFixed(0)} ms in all (target <= 5000), ${held.inserts} inserts; ${Number(rows[0]!.n).toLocaleString('en')} runs after`,
  );
  return { runs: convertRuns, migrateMs, writer: held };
}

/** The release's migrations before `tag`, in a folder of their own. */
function releaseBefore(tag: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'cards-sync-migrations-'));
  cpSync(migrationsFolder(), dir, { recursive: true });
  const path = join(dir, 'meta', '_journal.json');
  const journal = JSON.parse(readFileSync(path, 'utf8')) as { entries: { tag: string }[] };
  journal.entries = journal.entries.slice(
    0,
    journal.entries.findIndex((e) => e.tag === tag),
  );
  writeFileSync(path, JSON.stringify(journal));
  return dir;
}

await main();
