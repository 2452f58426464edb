ALTER TABLE "refresh_runs" DROP CONSTRAINT "refresh_runs_status_valid";--> statement-breakpoint
ALTER TABLE "refresh_runs" ADD COLUMN "planned_subscribers" integer;--> statement-breakpoint
ALTER TABLE "refresh_runs" ADD COLUMN "rate_budget_per_sec" integer;--> statement-breakpoint
ALTER TABLE "refresh_runs" ADD COLUMN "expected_finish_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "refresh_runs" ADD COLUMN "next_refresh_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "refresh_runs" ADD CONSTRAINT "refresh_runs_status_valid" CHECK ("refresh_runs"."status" in ('running', 'halted', 'completed', 'abandoned', 'empty'));