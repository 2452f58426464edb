-- The refresh's plan says where its budget goes (docs/refresh.md, "What the refresh promises"): the
-- longest interval it gives anyone when budget the threshold does not need buys coverage, the shares
-- of the budget for the plan and for coverage, and how it acts on the audit. Nullable: a plan stored
-- by an earlier release has none, and reads as the max age's.
ALTER TABLE "refresh_policy" ADD COLUMN "coverage_days" double precision;--> statement-breakpoint
ALTER TABLE "refresh_policy" ADD COLUMN "spend_plan" double precision;--> statement-breakpoint
ALTER TABLE "refresh_policy" ADD COLUMN "spend_coverage" double precision;--> statement-breakpoint
ALTER TABLE "refresh_policy" ADD COLUMN "audit_action" text;