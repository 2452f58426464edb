-- The ledger's maintainers took turns on advisory lock 7246118504, which the continuous refresh's
-- lease (jobs/continuous-lease.ts) took later as its session lock: while a worker holds the lease,
-- every sync_runs upkeep step waited for it until its lock_timeout, and failed ("canceling
-- statement due to lock timeout"), so the days ahead were not made and retention did not run.
-- The maintainers take 7246118506 from now on (db/ledger/partitions.ts). The lease keeps its key:
-- older workers of a rolling upgrade must agree with this release on whom it belongs to.
--
-- Not breaking: an older worker's upkeep takes the old key and fails as before while the lease is
-- held, and two maintainers on different keys at once only race to make the same day, which one of
-- them finds made (the check below, and CREATE TABLE refusing a second) and tries again next pass.
CREATE OR REPLACE FUNCTION sync_runs_add_partition(day date) RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
  name text := 'sync_runs_p' || to_char(day, 'YYYYMMDD');
  lo timestamptz := day::timestamp AT TIME ZONE 'UTC';
  hi timestamptz := (day + 1)::timestamp AT TIME ZONE 'UTC';
BEGIN
  -- One maintainer at a time (every worker runs the maintenance).
  PERFORM pg_advisory_xact_lock(7246118506);
  IF EXISTS (
    SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'sync_runs'::regclass AND (c.relname = name OR (
      pg_get_expr(c.relpartbound, c.oid) <> 'DEFAULT'
      AND coalesce(sync_runs_partition_from(c.oid), '-infinity') < hi
      AND coalesce(sync_runs_partition_to(c.oid), 'infinity') > lo))
  ) THEN
    RETURN NULL;
  END IF;
  EXECUTE format('CREATE TABLE %I (LIKE sync_runs INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', name);
  -- The range as a constraint first, so that ATTACH need not scan (the table is empty anyway).
  EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (started_at >= %L AND started_at < %L)',
    name, name || '_range', lo, hi);
  EXECUTE format('ALTER TABLE sync_runs ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', name, lo, hi);
  EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', name, name || '_range');
  RETURN name;
END;
$$;
