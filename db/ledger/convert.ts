import type pg from 'pg';
import { addLedgerPartitions, ledgerIsPartitioned } from './partitions.js';

// Converting a ledger that is still one plain table (migration 0019) without stopping syncs for
// longer than a rename. Everything that reads the whole table runs here first, while writers go on:
//   1. CHECK (started_at < cutoff) NOT VALID: a moment's ACCESS EXCLUSIVE lock, taken with a
//      lock_timeout and tried again, so writers never queue behind it for long;
//   2. VALIDATE: a scan under SHARE UPDATE EXCLUSIVE, which writers do not wait for;
//   3. the BRIN index of the partitioned table, built CONCURRENTLY.
// With those, ATTACH PARTITION in the migration needs neither a scan nor an index build.
// `cutoff` is a UTC midnight two days on (and past every stored row): the migration follows within
// minutes, and until then each new row still passes the CHECK.

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Prepares the plain ledger for migration 0019; returns the cutoff, or null when there is nothing to do. */
export async function prepareLedgerConversion(client: pg.ClientBase): Promise<Date | null> {
  const { rows: kind } = await client.query<{ relkind: string | null }>(
    `select (select relkind::text from pg_class where oid = to_regclass('public.sync_runs')) as relkind`,
  );
  if (kind[0]?.relkind !== 'r') return null;
  // By the database's clock alone. Rows already past it (written under a clock far ahead) are left
  // to the migration, which moves them aside under its lock: then nothing is prepared here.
  const { rows } = await client.query<{ cutoff: Date; beyond: boolean }>(
    `select c.cutoff, exists (select 1 from sync_runs where started_at >= c.cutoff) as beyond
     from (select (date_trunc('day', now() at time zone 'UTC') + interval '2 days') at time zone 'UTC' as cutoff) c`,
  );
  const cutoff = rows[0]!.cutoff;
  if (rows[0]!.beyond) return null;
  for (let attempt = 1; ; attempt++) {
    try {
      await client.query('begin');
      await client.query(`set local lock_timeout = '200ms'`);
      await client.query('alter table sync_runs drop constraint if exists sync_runs_before_partitioning');
      await client.query(
        `alter table sync_runs add constraint sync_runs_before_partitioning check (started_at < '${cutoff.toISOString()}') not valid`,
      );
      await client.query('commit');
      break;
    } catch (error) {
      await client.query('rollback').catch(() => undefined);
      if ((error as { code?: string }).code !== '55P03' || attempt >= 50) throw error;
      await sleep(200);
    }
  }
  await client.query('alter table sync_runs validate constraint sync_runs_before_partitioning');
  // A build that failed half-way leaves an invalid index, which ATTACH would not use: start again.
  const { rows: invalid } = await client.query(
    `select 1 from pg_index where indexrelid = to_regclass('public.sync_runs_legacy_started_id_idx') and not indisvalid`,
  );
  if (invalid.length > 0) await client.query('drop index concurrently sync_runs_legacy_started_id_idx');
  await client.query(
    `create index concurrently if not exists sync_runs_legacy_started_id_idx on sync_runs
     using brin (started_at, id) with (autosummarize = true, pages_per_range = 16)`,
  );
  return cutoff;
}

/** After a failed migrate: a plain ledger must not keep a CHECK whose cutoff will come. */
export async function undoLedgerPreparation(client: pg.ClientBase): Promise<void> {
  const { rows } = await client.query<{ relkind: string | null }>(
    `select (select relkind::text from pg_class where oid = to_regclass('public.sync_runs')) as relkind`,
  );
  if (rows[0]?.relkind === 'r') {
    await client.query('alter table sync_runs drop constraint if exists sync_runs_before_partitioning');
  }
}

/**
 * After every migrate: the days ahead have their partitions, so no worker is needed for a first
 * sync. A day that cannot be made now (rows the default partition caught for it, which only a
 * worker's upkeep moves) does not fail the migration: the default partition holds its runs
 * meanwhile, and `doctor` says so.
 */
export async function afterMigrations(client: pg.ClientBase): Promise<void> {
  if (!(await ledgerIsPartitioned(client))) return;
  await addLedgerPartitions(client, { aheadDays: 7 }).catch(() => undefined);
}

/**
 * A plain ledger still carrying the preparation's CHECK after a `migrate` that was killed: once its
 * cutoff is less than a day away (a running migrate's is two), it is dropped before it can refuse
 * a run. Returns whether one was.
 */
export async function dropStaleConversionCheck(client: pg.ClientBase | pg.Pool): Promise<boolean> {
  const { rows } = await client.query<{ stale: boolean }>(
    `select (regexp_match(pg_get_constraintdef(c.oid), '''([^'']+)'''))[1]::timestamptz < now() + interval '1 day' as stale
     from pg_constraint c
     where c.conrelid = to_regclass('public.sync_runs') and c.conname = 'sync_runs_before_partitioning'
       and (select relkind from pg_class where oid = c.conrelid) = 'r'`,
  );
  if (rows[0]?.stale !== true) return false;
  await client.query('alter table sync_runs drop constraint if exists sync_runs_before_partitioning');
  return true;
}
