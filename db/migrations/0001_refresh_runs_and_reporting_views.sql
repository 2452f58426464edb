CREATE TABLE "refresh_runs" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "refresh_runs_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"trigger" text NOT NULL,
	"status" text NOT NULL,
	"started_at" timestamp with time zone NOT NULL,
	"fanout_finished_at" timestamp with time zone,
	"finished_at" timestamp with time zone,
	"stale_before" timestamp with time zone,
	"cursor" bigint DEFAULT 0 NOT NULL,
	"subscribers_total" integer DEFAULT 0 NOT NULL,
	"enqueued" integer DEFAULT 0 NOT NULL,
	"already_queued" integer DEFAULT 0 NOT NULL,
	"succeeded" integer DEFAULT 0 NOT NULL,
	"failed" integer DEFAULT 0 NOT NULL,
	"not_found" integer DEFAULT 0 NOT NULL,
	"invalid" integer DEFAULT 0 NOT NULL,
	"cards_added" integer DEFAULT 0 NOT NULL,
	"cards_removed" integer DEFAULT 0 NOT NULL,
	"wiped_subscribers" integer DEFAULT 0 NOT NULL,
	"last_sync_run_id" bigint DEFAULT 0 NOT NULL,
	"halted_reason" text,
	"breaker_overridden" boolean DEFAULT false NOT NULL,
	"job_id" text,
	CONSTRAINT "refresh_runs_trigger_valid" CHECK ("refresh_runs"."trigger" in ('nightly', 'manual')),
	CONSTRAINT "refresh_runs_status_valid" CHECK ("refresh_runs"."status" in ('running', 'halted', 'completed', 'abandoned'))
);
--> statement-breakpoint
DROP INDEX "sync_runs_refresh_run_id_idx";--> statement-breakpoint
CREATE UNIQUE INDEX "refresh_runs_one_in_progress_idx" ON "refresh_runs" USING btree ((true)) WHERE "refresh_runs"."status" in ('running', 'halted');--> statement-breakpoint
CREATE INDEX "refresh_runs_started_at_idx" ON "refresh_runs" USING btree ("started_at");--> statement-breakpoint
CREATE INDEX "sync_runs_refresh_run_id_idx" ON "sync_runs" USING btree ("refresh_run_id","id");--> statement-breakpoint
CREATE VIEW "public"."saved_cards_active" AS (select "id", "subscriber_id", "bin_number", "card_family", "card_bank_code", "card_bank_name", "company_id", "create_date", "first_seen_at", "last_seen_at", "updated_at" from "saved_cards" where "saved_cards"."removed_at" is null);--> statement-breakpoint
CREATE VIEW "public"."subscriber_freshness" AS (select "subscriber_id", "last_success_at", now() - "last_success_at" as "age", "last_synced_at", "last_status", "consecutive_failures", "active_cards" from "subscribers");