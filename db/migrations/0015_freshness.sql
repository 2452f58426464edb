CREATE TABLE "refresh_policy" (
	"id" integer PRIMARY KEY DEFAULT 1 NOT NULL,
	"mode" text NOT NULL,
	"threshold_days" double precision,
	"prior_rate_per_day" double precision NOT NULL,
	"max_age_seconds" integer NOT NULL,
	"budget_per_sec" double precision,
	"audit_share" double precision NOT NULL,
	"subscribers" bigint DEFAULT 0 NOT NULL,
	"keeps_max_age" boolean NOT NULL,
	"max_age_needs_per_sec" double precision NOT NULL,
	"computed_at" timestamp with time zone NOT NULL,
	CONSTRAINT "refresh_policy_one_row" CHECK ("refresh_policy"."id" = 1)
);
--> statement-breakpoint
ALTER TABLE "refresh_runs" DROP CONSTRAINT "refresh_runs_trigger_valid";--> statement-breakpoint
ALTER TABLE "sync_runs" DROP CONSTRAINT "sync_runs_trigger_valid";--> statement-breakpoint
ALTER TABLE "refresh_runs" ADD COLUMN "cursor_due" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "subscribers" ADD COLUMN "change_rate_per_day" double precision;--> statement-breakpoint
ALTER TABLE "subscribers" ADD COLUMN "next_refresh_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "subscribers" ADD COLUMN "change_observations" real[];--> statement-breakpoint
CREATE INDEX "subscribers_next_refresh_idx" ON "subscribers" USING btree ("next_refresh_at" NULLS FIRST,"subscriber_id");--> statement-breakpoint
CREATE INDEX "sync_runs_audit_idx" ON "sync_runs" USING btree ("started_at") WHERE "sync_runs"."trigger" = 'audit';--> statement-breakpoint
-- NOT VALID, then VALIDATE: the check of the existing rows takes no lock that stops the syncs.
ALTER TABLE "refresh_runs" ADD CONSTRAINT "refresh_runs_trigger_valid" CHECK ("refresh_runs"."trigger" in ('nightly', 'manual', 'continuous')) NOT VALID;--> statement-breakpoint
ALTER TABLE "refresh_runs" VALIDATE CONSTRAINT "refresh_runs_trigger_valid";--> statement-breakpoint
ALTER TABLE "sync_runs" ADD CONSTRAINT "sync_runs_trigger_valid" CHECK ("sync_runs"."trigger" in ('manual', 'nightly', 'api', 'cli', 'refresh', 'audit')) NOT VALID;--> statement-breakpoint
ALTER TABLE "sync_runs" VALIDATE CONSTRAINT "sync_runs_trigger_valid";