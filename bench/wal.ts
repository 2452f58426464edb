import pg from 'pg';

// What a pipeline cost Postgres in WAL and in rows, read around the pipeline's worker process.
//
// WAL. `pg_current_wal_lsn()` just before the worker starts and just after it exits: the bytes
// between are the whole cluster's, so nothing else may write to the server during a run. A
// `checkpoint` comes first, before the first reading, so that every pipeline starts with the same
// full-page-write state: each page it modifies pays one full-page image (FPI) on its first change,
// as in production, where a nightly refresh touches a page once per refresh and a checkpoint
// (every 5 min by default) has always passed since the page was last written. Left to chance, the
// FPI share of a pipeline would depend on when the server last checkpointed. With pg_walinspect
// (contrib, PostgreSQL 15+) the same range is also read record by record and split: the records
// that touch the bench database's blocks, and those of their transactions (commits), against the
// rest of the cluster, and the image bytes among them. That shows both how much of a figure is
// images and whether anything else wrote during the run.
//
// Rows. `pg_stat_user_tables` of the bench database before and after. A backend hands its counts
// to the shared statistics at most once a second while busy, within a second of going idle, and
// always on exit, before it leaves `pg_stat_activity` (PostgreSQL 15: the stats flush is a
// before_shmem_exit hook, the pg_stat_activity entry goes in an on_shmem_exit one). So after the
// worker has exited, wait until the bench database has no client backend left, then read (after
// `pg_stat_clear_snapshot()`, so that no cached snapshot answers), and read again until two reads
// agree.

/** Counters of one table, from `pg_stat_user_tables`. */
export interface TableCounts {
  ins: number;
  upd: number;
  hot: number;
  del: number;
  seqRead: number;
  idxFetch: number;
  seqScan: number;
  idxScan: number;
}

/** The bench database's WAL in a range, from pg_walinspect: bytes of records, of which images. */
export interface WalSplit {
  /** Record bytes that touch the bench database, or belong to a transaction that does. */
  benchDbBytes: number;
  /** Of those, full-page images. */
  benchDbFpiBytes: number;
  /** Record bytes of everything else (other databases, shared catalogs, checkpoints…). */
  otherBytes: number;
}

const adminUrl = (databaseUrl: string) => databaseUrl.replace(/\/[^/]+$/, '/postgres');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function withClient<T>(url: string, f: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await f(client);
  } finally {
    await client.end();
  }
}

async function readTables(c: pg.Client): Promise<Record<string, TableCounts>> {
  await c.query('select pg_stat_clear_snapshot()');
  const { rows } = await c.query<{ relname: string } & Record<keyof TableCounts, string>>(
    `select relname, n_tup_ins as ins, n_tup_upd as upd, n_tup_hot_upd as hot, n_tup_del as del,
       coalesce(seq_tup_read, 0) as "seqRead", coalesce(idx_tup_fetch, 0) as "idxFetch",
       coalesce(seq_scan, 0) as "seqScan", coalesce(idx_scan, 0) as "idxScan"
     from pg_stat_user_tables`,
  );
  return Object.fromEntries(
    rows.map((r) => [
      r.relname,
      {
        ins: Number(r.ins),
        upd: Number(r.upd),
        hot: Number(r.hot),
        del: Number(r.del),
        seqRead: Number(r.seqRead),
        idxFetch: Number(r.idxFetch),
        seqScan: Number(r.seqScan),
        idxScan: Number(r.idxScan),
      },
    ]),
  );
}

/**
 * Just before a pipeline: installs pg_walinspect in the bench database if the server has it,
 * checkpoints, then reads the WAL position and the table counters.
 */
export async function markBefore(
  databaseUrl: string,
): Promise<{ lsn: string; tables: Record<string, TableCounts>; walinspect: boolean }> {
  return withClient(databaseUrl, async (c) => {
    const walinspect = await c.query('create extension if not exists pg_walinspect').then(
      () => true,
      () => false,
    );
    await c.query('checkpoint');
    const tables = await readTables(c);
    const { rows } = await c.query<{ lsn: string }>('select pg_current_wal_lsn()::text as lsn');
    return { lsn: rows[0]!.lsn, tables, walinspect };
  });
}

/**
 * Keeps the WAL from here on until the returned function is called: a temporary physical
 * replication slot, which goes with its session. Without it, a checkpoint during the pipeline
 * (another test run's, or max_wal_size reached) may recycle the segments before they are read.
 */
export async function holdWal(databaseUrl: string): Promise<() => Promise<void>> {
  const c = new pg.Client({ connectionString: adminUrl(databaseUrl) });
  await c.connect();
  await c
    .query('select pg_create_physical_replication_slot($1, true, true)', [`cards_sync_bench_${process.pid}`])
    .catch((error: Error) => console.error(`  (WAL not held: ${error.message})`));
  return () => c.end();
}

/** The WAL position now. */
export async function walPosition(databaseUrl: string): Promise<string> {
  return withClient(adminUrl(databaseUrl), async (c) => {
    const { rows } = await c.query<{ lsn: string }>('select pg_current_wal_lsn()::text as lsn');
    return rows[0]!.lsn;
  });
}

/** Bytes from `from` to `to`. */
export async function walBytes(databaseUrl: string, from: string, to: string): Promise<number> {
  return withClient(adminUrl(databaseUrl), async (c) => {
    const { rows } = await c.query<{ n: string }>('select pg_wal_lsn_diff($2, $1)::bigint as n', [from, to]);
    return Number(rows[0]!.n);
  });
}

/**
 * Waits until the bench database has no client backend left (its counters are then flushed);
 * false if some remain after `timeoutMs`.
 */
export async function settle(databaseUrl: string, timeoutMs = 10_000): Promise<boolean> {
  const name = new URL(databaseUrl).pathname.slice(1);
  return withClient(adminUrl(databaseUrl), async (c) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const { rows } = await c.query<{ n: number }>(
        `select count(*)::int as n from pg_stat_activity
         where datname = $1 and backend_type = 'client backend' and pid <> pg_backend_pid()`,
        [name],
      );
      if (rows[0]!.n === 0) return true;
      if (Date.now() > deadline) return false;
      await sleep(50);
    }
  });
}

/** The table counters once two reads 200 ms apart agree (at most ~3 s). */
export async function tableCounts(databaseUrl: string): Promise<Record<string, TableCounts>> {
  return withClient(databaseUrl, async (c) => {
    let last = await readTables(c);
    for (let i = 0; i < 15; i++) {
      await sleep(200);
      const now = await readTables(c);
      if (JSON.stringify(now) === JSON.stringify(last)) return now;
      last = now;
    }
    return last;
  });
}

/** The WAL of `from`..`to` split by database (pg_walinspect); null where the WAL is gone or unreadable. */
export async function walSplit(databaseUrl: string, from: string, to: string): Promise<WalSplit | null> {
  try {
    return await withClient(databaseUrl, async (c) => {
      const { rows } = await c.query<Record<keyof WalSplit, string>>(
        `with w as (
           select xid, record_length, fpi_length,
                  block_ref like '%/' || (select oid from pg_database where datname = current_database()) || '/%' as here
           from pg_get_wal_records_info($1, least($2::pg_lsn, pg_current_wal_flush_lsn()))),
         ours as (select distinct xid from w where here and xid <> 0),
         tagged as (select record_length, fpi_length, here or xid in (select xid from ours) as mine from w)
         select coalesce(sum(record_length) filter (where mine), 0) as "benchDbBytes",
                coalesce(sum(fpi_length) filter (where mine), 0) as "benchDbFpiBytes",
                coalesce(sum(record_length) filter (where not mine), 0) as "otherBytes"
         from tagged`,
        [from, to],
      );
      const r = rows[0]!;
      return {
        benchDbBytes: Number(r.benchDbBytes),
        benchDbFpiBytes: Number(r.benchDbFpiBytes),
        otherBytes: Number(r.otherBytes),
      };
    });
  } catch (error) {
    console.error(`  (WAL not split by database: ${(error as Error).message})`);
    return null;
  }
}

/**
 * The bench database's WAL of `from`..`to` by what it was written for: the relation of the
 * record's first block (table or index), or its kind for a record of no block (a commit). Bytes
 * (full-page images included) and of which images, largest first; null where the WAL is unreadable.
 */
export async function walByRelation(
  databaseUrl: string,
  from: string,
  to: string,
): Promise<{ what: string; bytes: number; fpiBytes: number }[] | null> {
  try {
    return await withClient(databaseUrl, async (c) => {
      const { rows } = await c.query<{ what: string; bytes: string; fpi: string }>(
        `with w as (
           select xid, resource_manager, record_type, record_length, fpi_length,
                  (regexp_match(block_ref, 'rel \\d+/(\\d+)/\\d+'))[1] as db,
                  (regexp_match(block_ref, 'rel \\d+/\\d+/(\\d+)'))[1]::oid as filenode
           from pg_get_wal_records_info($1, least($2::pg_lsn, pg_current_wal_flush_lsn()))),
         here as (select oid::text as db from pg_database where datname = current_database()),
         ours as (select distinct xid from w where db = (select db from here) and xid <> 0)
         select coalesce(pg_filenode_relation(0, w.filenode)::regclass::text,
                         w.resource_manager || ' ' || w.record_type) as what,
                sum(record_length) as bytes, sum(fpi_length) as fpi
         from w
         where w.db = (select db from here) or (w.filenode is null and w.xid in (select xid from ours))
         group by 1 order by 2 desc`,
        [from, to],
      );
      return rows.map((r) => ({ what: r.what, bytes: Number(r.bytes), fpiBytes: Number(r.fpi) }));
    });
  } catch (error) {
    console.error(`  (WAL not split by relation: ${(error as Error).message})`);
    return null;
  }
}

/** Rows written per sync, by table (tables nothing was written to are left out). */
export function rowsPerSync(
  before: Record<string, TableCounts>,
  after: Record<string, TableCounts>,
  jobs: number,
): Record<string, { ins: number; upd: number; hot: number; del: number }> {
  const zero: TableCounts = {
    ins: 0,
    upd: 0,
    hot: 0,
    del: 0,
    seqRead: 0,
    idxFetch: 0,
    seqScan: 0,
    idxScan: 0,
  };
  const per = (x: number) => Math.round((x / jobs) * 1000) / 1000;
  const out: Record<string, { ins: number; upd: number; hot: number; del: number }> = {};
  for (const [table, a] of Object.entries(after)) {
    const b = before[table] ?? zero;
    const d = {
      ins: per(a.ins - b.ins),
      upd: per(a.upd - b.upd),
      hot: per(a.hot - b.hot),
      del: per(a.del - b.del),
    };
    if (d.ins || d.upd || d.hot || d.del) out[table] = d;
  }
  return out;
}

/** Of one table, per sync: tuples read (seq_tup_read + idx_tup_fetch) and scans started. */
export function readsPerSync(
  before: Record<string, TableCounts>,
  after: Record<string, TableCounts>,
  table: string,
  jobs: number,
): { tuples: number; seqScans: number; idxScans: number } {
  const a = after[table];
  const b = before[table];
  const per = (x: number) => Math.round((x / jobs) * 1000) / 1000;
  if (!a) return { tuples: 0, seqScans: 0, idxScans: 0 };
  const d = (k: keyof TableCounts) => a[k] - (b?.[k] ?? 0);
  return {
    tuples: per(d('seqRead') + d('idxFetch')),
    seqScans: per(d('seqScan')),
    idxScans: per(d('idxScan')),
  };
}

/**
 * Tuples read by sequential scans per sync, by table (tables with none left out): a lookup that
 * should go by index and does not (a plan cached while its table was small) shows here first.
 */
export function seqTuplesPerSync(
  before: Record<string, TableCounts>,
  after: Record<string, TableCounts>,
  jobs: number,
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [table, a] of Object.entries(after)) {
    const read = a.seqRead - (before[table]?.seqRead ?? 0);
    if (read > 0) out[table] = Math.round((read / jobs) * 1000) / 1000;
  }
  return out;
}
