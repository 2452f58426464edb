-- `cards-sync webhooks remove ID`: an endpoint taken away is kept as a row, marked here, so that its
-- past deliveries (webhook_deliveries, webhook_attempts: ON DELETE CASCADE from it) stay readable
-- until CHANGE_EVENTS_RETENTION_DAYS; the workers' retention deletes the row after that. Removal
-- also disables it (enabled = false), so a worker of an earlier release, which knows no removed_at,
-- takes no event for it and claims none of its deliveries.
--
-- Not breaking, and no rewrite: a nullable column without a default is a catalog change.
ALTER TABLE "webhook_endpoints" ADD COLUMN "removed_at" timestamp with time zone;
