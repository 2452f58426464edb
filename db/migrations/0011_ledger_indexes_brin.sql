-- The ledger's started_at and refresh_run_id indexes become block-range (BRIN) indexes (issue 18):
-- every sync appends a sync_runs row, and each B-tree wrote an entry for it (143 of an unchanged
-- sync's 644 bytes of WAL). Rows arrive in started_at order and a refresh's rows together, and
-- every question asked of these columns is a time range or one run's rows, which a BRIN index
-- answers. Building them reads sync_runs once; writes to it wait for that.
DROP INDEX "sync_runs_started_at_idx";--> statement-breakpoint
DROP INDEX "sync_runs_refresh_run_id_idx";--> statement-breakpoint
CREATE INDEX "sync_runs_started_at_idx" ON "sync_runs" USING brin ("started_at") WITH (autosummarize=true);--> statement-breakpoint
CREATE INDEX "sync_runs_refresh_run_id_idx" ON "sync_runs" USING brin ("refresh_run_id") WITH (autosummarize=true);