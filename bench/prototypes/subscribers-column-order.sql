-- bench:wal-cli --prototype-sql bench/prototypes/subscribers-column-order.sql: subscribers rebuilt with the columns a
-- sync rewrites last, so that a HOT update logs only what follows the unchanged prefix (docs/benchmarks.md,
-- bench:wal-cli). A measurement, not a migration.
do $$
declare
  names text[] := array['saved_cards_active', 'subscriber_freshness', 'subscribers_report'];
  defs text[];
  n text;
begin
  select array_agg(format('create view %I as %s', x, pg_get_viewdef(x::regclass, true))) into defs from unnest(names) x;
  foreach n in array names loop execute format('drop view %I', n); end loop;
  alter table subscribers rename to subscribers_old;
  alter index subscribers_pkey rename to subscribers_old_pkey;
  alter index subscribers_email_lower_idx rename to subscribers_old_email_lower_idx;
  create table subscribers (
    subscriber_id bigint not null primary key,
    email text,
    last_status text,
    last_error text,
    consecutive_failures integer not null default 0,
    active_cards integer not null default 0,
    consecutive_not_found integer not null default 0,
    gone_at timestamptz,
    cards_digest text,
    last_synced_at timestamptz,
    last_success_at timestamptz,
    change_rate_per_day double precision,
    next_refresh_at timestamptz,
    change_observations real[]
  ) with (fillfactor = 50);
  insert into subscribers (subscriber_id, email, last_status, last_error, consecutive_failures, active_cards,
      consecutive_not_found, gone_at, cards_digest, last_synced_at, last_success_at, change_rate_per_day,
      next_refresh_at, change_observations)
    select subscriber_id, email, last_status, last_error, consecutive_failures, active_cards,
      consecutive_not_found, gone_at, cards_digest, last_synced_at, last_success_at, change_rate_per_day,
      next_refresh_at, change_observations from subscribers_old;
  drop table subscribers_old;
  create unique index subscribers_email_lower_idx on subscribers (lower(email)) where email is not null;
  create trigger subscribers_schedule_row after insert on subscribers for each row execute function subscriber_schedule_insert();
  create trigger subscribers_schedule_sooner after update of next_refresh_at on subscribers for each row
    when (new.next_refresh_at is distinct from old.next_refresh_at) execute function subscriber_schedule_sooner();
  foreach n in array defs loop execute n; end loop;
end $$;
