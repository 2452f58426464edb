DROP VIEW "public"."subscribers_report";--> statement-breakpoint
ALTER TABLE "saved_card_changes" ADD COLUMN "previous" jsonb;--> statement-breakpoint
ALTER TABLE "saved_card_changes" ADD COLUMN "reason" text;--> statement-breakpoint
ALTER TABLE "subscribers" ADD COLUMN "consecutive_not_found" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "subscribers" ADD COLUMN "gone_at" timestamp with time zone;--> statement-breakpoint
CREATE VIEW "public"."subscribers_report" AS (select "subscriber_id", "last_synced_at", "last_success_at", "last_status", "last_error", "consecutive_failures", "active_cards", "consecutive_not_found", "gone_at" from "subscribers");