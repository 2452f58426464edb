-- subscribers_report gains the freshness model's columns (issue 35): the analytics guide promised
-- every column of subscribers but email, and change_rate_per_day, next_refresh_at and
-- change_observations (migration 0015) were missing. cards_digest stays out (the sync's own
-- shortcut). A view gains columns only at its end; CREATE OR REPLACE keeps its grants
-- (db/reporting-role.sql), where drizzle-kit's DROP and CREATE would take them away.
CREATE OR REPLACE VIEW "public"."subscribers_report" AS (select "subscriber_id", "last_synced_at", "last_success_at", "last_status", "last_error", "consecutive_failures", "active_cards", "consecutive_not_found", "gone_at", "change_rate_per_day", "next_refresh_at", "change_observations" from "subscribers");
