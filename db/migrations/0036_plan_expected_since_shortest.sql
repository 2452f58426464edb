-- Since when the plans in force have expected about the same share of their own syncs to find the
-- cards changed: the refresh holds its syncs since then, the latest few hundred, to the expectation
-- (docs/refresh.md). And the shortest interval the plan gives anyone: the budget's mean interval over
-- ten, so that no subscriber takes more than ten times the mean syncs. Both nullable: a plan stored
-- by an earlier release has neither (read as its computed_at, and as no shortest interval), and an
-- earlier release writing the plan leaves them null.
ALTER TABLE "refresh_policy" ADD COLUMN "expected_since" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "refresh_policy" ADD COLUMN "min_interval_days" double precision;
