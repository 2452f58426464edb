-- What the plan expects of its own syncs: the share that should find the cards changed, were its
-- rates right. The refresh holds its syncs since the plan to it (docs/refresh.md). Nullable: a plan
-- stored by an earlier release has none, and an earlier release writing the plan leaves it null.
ALTER TABLE "refresh_policy" ADD COLUMN "expected_changed_share" double precision;