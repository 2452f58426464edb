-- The population's mixture of change rates (src/freshness/mixture.ts): the prior a subscriber's
-- estimate starts from. Nullable and additive: workers of the previous release neither read nor
-- write it, and read the single prior rate as before.
ALTER TABLE "refresh_policy" ADD COLUMN "prior_mixture" jsonb;
