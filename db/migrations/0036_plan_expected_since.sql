-- Since when the plans in force have expected about the same share of their own syncs to find the
-- cards changed: the refresh holds its syncs since then, the latest few hundred, to the expectation
-- (docs/refresh.md). Nullable: a plan stored by an earlier release has none and is read as its
-- computed_at, and an earlier release writing the plan leaves it null.
ALTER TABLE "refresh_policy" ADD COLUMN "expected_since" timestamp with time zone;
