-- Since when the plans in force have expected about the same share of their own syncs to find the
-- cards changed, and the share that expectation began at: the refresh holds its latest syncs since
-- then to the expectation (docs/refresh.md). The shortest interval the plan gives a wallet changing
-- at most twice a max age: the scheduled budget's mean interval over ten, so that no quiet
-- subscriber takes more than ten times the mean syncs. And when a release that writes all three
-- last wrote the row (equal to computed_at then): an earlier release writing the plan during a
-- rolling upgrade leaves them as they were and moves computed_at on, and the row then reads as if it
-- had none of them (expected_since as computed_at, expected_from as expected_changed_share, no
-- shortest interval). All nullable: a plan stored before this migration has none of them.
ALTER TABLE "refresh_policy" ADD COLUMN "expected_since" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "refresh_policy" ADD COLUMN "expected_from" double precision;--> statement-breakpoint
ALTER TABLE "refresh_policy" ADD COLUMN "min_interval_days" double precision;--> statement-breakpoint
ALTER TABLE "refresh_policy" ADD COLUMN "stamped_at" timestamp with time zone;
