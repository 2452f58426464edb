-- sync_runs loses its refresh_run_id index (issue 18): a B-tree entry for every sync (76 of an
-- unchanged sync's 644 bytes of WAL) served one query a refresh run, its close, which now finds
-- the run's rows by id: every row of a run has an id greater than refresh_runs.prior_sync_run_id,
-- the newest sync_runs.id when the run began. Runs begun before this migration have 0 there, so
-- their close reads the whole ledger once, as it would without the index.
DROP INDEX "sync_runs_refresh_run_id_idx";--> statement-breakpoint
ALTER TABLE "refresh_runs" ADD COLUMN "prior_sync_run_id" bigint DEFAULT 0 NOT NULL;