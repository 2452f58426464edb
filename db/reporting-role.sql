-- A read-only role for analysts: the reporting views and tables, never a card token or an e-mail.
-- Apply after `cards-sync migrate`, as a superuser or the tables' owner:
--   psql "$DATABASE_URL" -f db/reporting-role.sql
-- then give people logins that inherit it:
--   CREATE ROLE alice LOGIN PASSWORD '...' IN ROLE cards_sync_reporting;
-- Safe to run again (after a migration that adds tables or columns, run it again).

DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'cards_sync_reporting') THEN
    CREATE ROLE cards_sync_reporting NOLOGIN;
  END IF;
  EXECUTE format('GRANT CONNECT ON DATABASE %I TO cards_sync_reporting', current_database());
END
$$;

GRANT USAGE ON SCHEMA public TO cards_sync_reporting;

-- The views run with their owner's rights: the role reads them without any right on card_token
-- or e-mail addresses.
GRANT SELECT ON saved_cards_active, subscriber_freshness, subscribers_report, sync_runs_report,
  saved_card_history TO cards_sync_reporting;
-- saved_cards_as_of(at) and saved_card_as_of(card, at) run with the caller's rights: they read only
-- columns granted below.
GRANT EXECUTE ON FUNCTION saved_cards_as_of(timestamptz), saved_cards_as_of(timestamptz, bigint),
  saved_card_as_of(bigint, timestamptz)
  TO cards_sync_reporting;
-- What saved_card_as_of calls for runs more than a week before `at` (migration 0032). Here only once
-- they exist, so the file still runs on a database migrated before it.
DO $$
BEGIN
  IF to_regprocedure('sync_runs_last_success(bigint, timestamptz, timestamptz, timestamptz)') IS NOT NULL THEN
    GRANT EXECUTE ON FUNCTION sync_runs_started_before(timestamptz),
      sync_runs_last_success(bigint, timestamptz, timestamptz, timestamptz) TO cards_sync_reporting;
  END IF;
END
$$;
-- card_conflicts: cards listed by two subscribers at once (ids and times only).
GRANT SELECT ON saved_card_changes, refresh_runs, card_conflicts, refresh_policy TO cards_sync_reporting;
-- subscriber_schedule (migration 0025): ids and the scheduler's due times. Granted by 0025 itself
-- too; here only once it exists, so the file still runs on a database migrated before it.
DO $$
BEGIN
  IF to_regclass('public.subscriber_schedule') IS NOT NULL THEN
    GRANT SELECT ON subscriber_schedule TO cards_sync_reporting;
  END IF;
END
$$;

-- saved_cards itself: every column but card_token and its fingerprint.
REVOKE ALL ON saved_cards FROM cards_sync_reporting;
GRANT SELECT (id, subscriber_id, bin_number, card_family, card_bank_code, card_bank_name, company_id,
              create_date, first_seen_at, last_seen_at, updated_at, removed_at)
  ON saved_cards TO cards_sync_reporting;

-- subscribers and sync_runs: every column but email (an earlier version of this file granted the
-- whole tables; the REVOKEs take that back).
REVOKE ALL ON subscribers, sync_runs FROM cards_sync_reporting;
GRANT SELECT (subscriber_id, last_synced_at, last_success_at, last_status, last_error,
              consecutive_failures, active_cards, consecutive_not_found, gone_at,
              change_rate_per_day, next_refresh_at, change_observations)
  ON subscribers TO cards_sync_reporting;
-- subscribers.stale_rate_per_day (migration 0038): here only once it exists, so the file still runs
-- on a database migrated before it.
DO $$
BEGIN
  IF EXISTS (SELECT FROM information_schema.columns
             WHERE table_schema = 'public' AND table_name = 'subscribers' AND column_name = 'stale_rate_per_day') THEN
    GRANT SELECT (stale_rate_per_day) ON subscribers TO cards_sync_reporting;
  END IF;
END
$$;
GRANT SELECT (id, subscriber_id, trigger, job_id, refresh_run_id, started_at, finished_at, status,
              cards_seen, inserted, updated, unchanged, removed, restored, error_code, error_message)
  ON sync_runs TO cards_sync_reporting;

-- The audit trail is for operators: no right at all.
REVOKE ALL ON admin_actions FROM cards_sync_reporting;
