-- The rate the estimate of the stale share reads for each subscriber (issue 54): the posterior
-- mean rate, which it read before, holds a little of every fast rate for a wallet watched once or
-- twice, and 1 − e^{−λ·age} at that mean overstates its chance of a change (Jensen's inequality):
-- in fleets of under one sync per subscriber per max age the estimate read 48.6% stale where 35.1%
-- were (docs/refresh.md, "How stale is the copy?"). Each sync now also stores the rate that keeps its copy stale over its planned interval as
-- long as the posterior does (src/freshness/mixture.ts `posteriorStaleRate`). Nullable, no default,
-- no rewrite: a row not yet synced by this release reads change_rate_per_day, as before.
ALTER TABLE "subscribers" ADD COLUMN "stale_rate_per_day" double precision;--> statement-breakpoint
-- The reporting role reads subscribers column by column (db/reporting-role.sql, which grants this
-- one too when run again): here only where the role exists.
DO $$
BEGIN
  IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'cards_sync_reporting') THEN
    GRANT SELECT ("stale_rate_per_day") ON "subscribers" TO cards_sync_reporting;
  END IF;
END
$$;
--> statement-breakpoint
-- subscribers_report keeps every column of subscribers but email and cards_digest (docs/analytics.md):
-- the new one goes on the end, which CREATE OR REPLACE VIEW allows; the reporting role's grant on
-- the view stands.
CREATE OR REPLACE VIEW "public"."subscribers_report" AS (select "subscriber_id", "last_synced_at", "last_success_at", "last_status", "last_error", "consecutive_failures", "active_cards", "consecutive_not_found", "gone_at", "change_rate_per_day", "next_refresh_at", "change_observations", "stale_rate_per_day" from "subscribers");
