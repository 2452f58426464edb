import type pg from 'pg';
import { dropExpiredPartitions } from '../../db/ledger/partitions.js';
import { lsn, mb, sec, sizes, timed, walSince } from './measure.js';
import { startWriter } from './writer.js';

// The ledger bench's retention of the oldest day, both ways: dropping its partition of sync_runs,
// and a DELETE on the previous release's plain table; each with the writer inserting meanwhile.

/** Drops the oldest day (from `start`) of both ledgers, each its way; prints and returns the figures. */
export async function retention(pool: pg.Pool, url: string, start: Date) {
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
  return {
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
}
