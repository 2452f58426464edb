// The ledger bench's rows and tables, in SQL: runs generated as continuous mode writes them, and
// the previous release's plain ledger to set beside the partitioned one.

/** The subscriber ids the generated runs spread over. */
const SUBSCRIBERS = 1_000_000;

/** The columns every generated run fills, in the order of {@link runsOf}'s select. */
export const COLUMNS = `subscriber_id, trigger, job_id, refresh_run_id, started_at, finished_at, status, cards_seen,
  inserted, updated, unchanged, removed, restored, error_code, error_message`;

/** Runs number lo..hi-1 of day `d` (0 = the oldest) of `n` a day, spread evenly over the day: as continuous mode writes them. */
export const runsOf = (
  lo: number,
  hi: number,
  d: number,
  n: number,
  release: 'this' | 'previous' = 'this',
) => `
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

/** The previous release's sync_runs: one plain table, its primary key and B-trees. */
export const PLAIN_LEDGER = `
  create table sync_runs_before (
    id bigint generated always as identity primary key, subscriber_id bigint, email text, trigger text not null,
    job_id text, refresh_run_id bigint, started_at timestamptz not null, finished_at timestamptz not null,
    status text not null, cards_seen integer default 0 not null, inserted integer default 0 not null,
    updated integer default 0 not null, unchanged integer default 0 not null, removed integer default 0 not null,
    restored integer default 0 not null, error_code text, error_message text);
  create index sync_runs_before_subscriber_started_idx on sync_runs_before (subscriber_id, started_at);
  create index sync_runs_before_started_at_idx on sync_runs_before (started_at);
  create index sync_runs_before_audit_idx on sync_runs_before (started_at) where trigger = 'audit'`;
