import type pg from 'pg';

// What the ledger bench reads off Postgres and the clock: WAL written, the ledgers' sizes, how
// long a step took; and the units it prints them in.

export const sec = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
export const mb = (b: number) => `${(b / 1e6).toFixed(1)} MB`;

/** Where the WAL is now. */
export async function lsn(c: pg.Pool): Promise<string> {
  return (await c.query<{ l: string }>('select pg_current_wal_lsn()::text as l')).rows[0]!.l;
}

/** Bytes of WAL written since `from`. */
export async function walSince(c: pg.Pool, from: string): Promise<number> {
  return Number(
    (await c.query<{ b: string }>('select pg_wal_lsn_diff(pg_current_wal_lsn(), $1) as b', [from])).rows[0]!
      .b,
  );
}

/** Heap bytes, index bytes and rows: the partitioned ledger (`partitioned`) and the plain one (`before`). */
export async function sizes(pool: pg.Pool) {
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

/** `f`'s result, and how long it took in ms. */
export async function timed<T>(f: () => Promise<T>): Promise<[T, number]> {
  const t0 = performance.now();
  const r = await f();
  return [r, performance.now() - t0];
}

/** The median of 21 runs of `f`, in ms. */
export async function median(f: () => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < 21; i++) times.push((await timed(f))[1]);
  return times.sort((a, b) => a - b)[10]!;
}
