-- sync_runs becomes a table partitioned by started_at, one partition per UTC day (issue 28), so that
-- retention drops whole days (db/ledger/partitions.ts) instead of deleting rows: no DELETE, no WAL
-- per row, no bloat for the next day's rows to land in.
--
-- The ledger already stored is not copied: it becomes one partition, sync_runs_legacy, for every
-- started_at before a cutoff (a UTC midnight), and is dropped whole once its newest day is past the
-- retention. `cards-sync migrate` prepares it before this file runs, without stopping writers: a
-- CHECK (started_at < cutoff) added NOT VALID and then validated, and the BRIN index built
-- CONCURRENTLY (db/ledger/convert.ts). This file then only renames, creates and attaches, which
-- holds the lock that stops syncs for milliseconds. Run without that preparation (drizzle-kit
-- migrate), it does the same work under the lock instead: correct, and slower on a large ledger.
--
-- What a partitioned table cannot keep: a primary key on id alone (a unique index must hold the
-- partition key). Ids stay unique because the identity sequence alone hands them out (GENERATED
-- ALWAYS refuses an id given by hand); nothing looks a run up by id alone. No foreign key pointed
-- at sync_runs (saved_card_changes.sync_run_id outlives pruned runs by design), so none is lost.

-- Creates the partition of one UTC day unless there is one, as a table of its own attached
-- afterwards: ATTACH takes SHARE UPDATE EXCLUSIVE on sync_runs, which writers do not wait for,
-- where CREATE TABLE ... PARTITION OF would take ACCESS EXCLUSIVE. Returns its name, or null
-- when the day already had one.
CREATE FUNCTION sync_runs_add_partition(day date) RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
  name text := 'sync_runs_p' || to_char(day, 'YYYYMMDD');
  lo timestamptz := day::timestamp AT TIME ZONE 'UTC';
  hi timestamptz := (day + 1)::timestamp AT TIME ZONE 'UTC';
BEGIN
  -- One maintainer at a time (every worker runs the maintenance).
  PERFORM pg_advisory_xact_lock(7246118504);
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
--> statement-breakpoint
-- A partition's bounds (null for MINVALUE, MAXVALUE or the default partition), read from the
-- catalog's text of them, which prints each timestamp with its offset.
CREATE FUNCTION sync_runs_partition_from(part oid) RETURNS timestamptz
LANGUAGE sql STABLE
AS $$
  select (regexp_match(pg_get_expr(relpartbound, oid), 'FROM \(''([^'']+)''\)'))[1]::timestamptz
  from pg_class where oid = $1
$$;
--> statement-breakpoint
CREATE FUNCTION sync_runs_partition_to(part oid) RETURNS timestamptz
LANGUAGE sql STABLE
AS $$
  select (regexp_match(pg_get_expr(relpartbound, oid), 'TO \(''([^'']+)''\)'))[1]::timestamptz
  from pg_class where oid = $1
$$;
--> statement-breakpoint
DO $$
DECLARE
  cutoff timestamptz;
  next_id bigint;
  v record;
  g record;
  views text[] := '{}';
  defs text[] := '{}';
  grants text[] := '{}';
  d date;
BEGIN
  LOCK TABLE sync_runs IN ACCESS EXCLUSIVE MODE;

  -- The cutoff the preparation validated, if it did and it is still ahead of the clock.
  SELECT (regexp_match(pg_get_constraintdef(c.oid), '''([^'']+)'''))[1]::timestamptz INTO cutoff
  FROM pg_constraint c
  WHERE c.conrelid = 'sync_runs'::regclass AND c.conname = 'sync_runs_before_partitioning' AND c.convalidated;
  IF cutoff IS NULL OR cutoff < now() + interval '1 hour' THEN
    -- By the database's clock alone: a row written under a clock far ahead must not stretch the
    -- legacy partition over the days to come. Such rows are moved aside, and come back below into
    -- the partitions of their days (or the default one).
    cutoff := (date_trunc('day', now() AT TIME ZONE 'UTC') + interval '1 day') AT TIME ZONE 'UTC';
    CREATE TEMP TABLE sync_runs_far ON COMMIT DROP AS SELECT * FROM sync_runs WHERE started_at >= cutoff;
    DELETE FROM sync_runs WHERE started_at >= cutoff;
    ALTER TABLE sync_runs DROP CONSTRAINT IF EXISTS sync_runs_before_partitioning;
    EXECUTE format('ALTER TABLE sync_runs ADD CONSTRAINT sync_runs_before_partitioning CHECK (started_at < %L)', cutoff);
  END IF;

  -- Views on sync_runs follow the table through a rename: their text is kept to make them again
  -- on the new one, and so are the privileges granted on it.
  FOR v IN
    SELECT DISTINCT dep.oid::regclass::text AS name, pg_get_viewdef(dep.oid) AS def
    FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid JOIN pg_class dep ON dep.oid = r.ev_class
    WHERE d.refobjid = 'sync_runs'::regclass AND dep.oid <> 'sync_runs'::regclass
  LOOP
    views := views || v.name;
    defs := defs || v.def;
  END LOOP;
  FOR g IN
    SELECT format('GRANT %s ON sync_runs TO %s', privilege_type,
      CASE WHEN grantee = 'PUBLIC' THEN 'PUBLIC' ELSE quote_ident(grantee) END) AS stmt
    FROM information_schema.table_privileges
    WHERE table_schema = 'public' AND table_name = 'sync_runs' AND grantee <> current_user
    UNION ALL
    SELECT format('GRANT %s (%s) ON sync_runs TO %s', privilege_type,
      string_agg(quote_ident(column_name), ', '),
      CASE WHEN grantee = 'PUBLIC' THEN 'PUBLIC' ELSE quote_ident(grantee) END)
    FROM information_schema.column_privileges
    WHERE table_schema = 'public' AND table_name = 'sync_runs' AND grantee <> current_user
      AND NOT EXISTS (SELECT 1 FROM information_schema.table_privileges t
        WHERE t.table_schema = 'public' AND t.table_name = 'sync_runs'
          AND t.grantee = column_privileges.grantee AND t.privilege_type = column_privileges.privilege_type)
    GROUP BY grantee, privilege_type
  LOOP
    grants := grants || g.stmt;
  END LOOP;

  SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END INTO next_id FROM sync_runs_id_seq;
  ALTER TABLE sync_runs RENAME TO sync_runs_legacy;
  ALTER TABLE sync_runs_legacy ALTER COLUMN id DROP IDENTITY;
  ALTER INDEX IF EXISTS sync_runs_pkey RENAME TO sync_runs_legacy_pkey;
  ALTER INDEX IF EXISTS sync_runs_subscriber_started_idx RENAME TO sync_runs_legacy_subscriber_started_idx;
  ALTER INDEX IF EXISTS sync_runs_started_at_idx RENAME TO sync_runs_legacy_started_at_idx;
  ALTER INDEX IF EXISTS sync_runs_audit_idx RENAME TO sync_runs_legacy_audit_idx;

  -- The columns in the order that wastes no alignment padding (the fixed-width 8-byte ones, then
  -- the 4-byte ones, then text): 9 bytes a run less than the plain table's order. Every reader
  -- names its columns (sync_runs_report lists them in its own order).
  CREATE TABLE sync_runs (
    id bigint NOT NULL GENERATED ALWAYS AS IDENTITY,
    subscriber_id bigint,
    refresh_run_id bigint,
    started_at timestamptz NOT NULL,
    finished_at timestamptz NOT NULL,
    cards_seen integer DEFAULT 0 NOT NULL,
    inserted integer DEFAULT 0 NOT NULL,
    updated integer DEFAULT 0 NOT NULL,
    unchanged integer DEFAULT 0 NOT NULL,
    removed integer DEFAULT 0 NOT NULL,
    restored integer DEFAULT 0 NOT NULL,
    trigger text NOT NULL,
    status text NOT NULL,
    job_id text,
    email text,
    error_code text,
    error_message text,
    CONSTRAINT sync_runs_trigger_valid CHECK (trigger IN ('manual', 'nightly', 'api', 'cli', 'refresh', 'audit')),
    CONSTRAINT sync_runs_status_valid CHECK (status IN ('succeeded', 'not_found', 'invalid_response', 'failed', 'auth_rejected', 'rate_limited', 'superseded'))
  ) PARTITION BY RANGE (started_at);
  EXECUTE format('ALTER TABLE sync_runs ALTER COLUMN id RESTART WITH %s', next_id);
  CREATE INDEX sync_runs_subscriber_started_idx ON sync_runs USING btree (subscriber_id, started_at);
  CREATE INDEX sync_runs_started_id_idx ON sync_runs USING brin (started_at, id) WITH (autosummarize = true, pages_per_range = 16);
  CREATE INDEX sync_runs_audit_idx ON sync_runs USING btree (started_at) WHERE trigger = 'audit';
  -- The views read the new table from here on (their privileges stay theirs).
  FOR i IN 1 .. coalesce(array_length(views, 1), 0) LOOP
    EXECUTE format('CREATE OR REPLACE VIEW %s AS %s', views[i], defs[i]);
  END LOOP;

  IF EXISTS (SELECT 1 FROM sync_runs_legacy) THEN
    -- Its indexes match the new ones (the BRIN was built by the preparation, or is built here), and
    -- the validated CHECK spares ATTACH a scan.
    EXECUTE format('ALTER TABLE sync_runs ATTACH PARTITION sync_runs_legacy FOR VALUES FROM (MINVALUE) TO (%L)', cutoff);
  ELSE
    DROP TABLE sync_runs_legacy;
    cutoff := date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
  END IF;
  -- Whatever no day holds (a clock far off): never an insert refused for want of a partition. The
  -- maintenance moves such rows into partitions of their days.
  CREATE TABLE sync_runs_default PARTITION OF sync_runs DEFAULT;
  d := (cutoff AT TIME ZONE 'UTC')::date;
  WHILE d <= (now() AT TIME ZONE 'UTC')::date + 7 LOOP
    PERFORM sync_runs_add_partition(d);
    d := d + 1;
  END LOOP;

  FOR i IN 1 .. coalesce(array_length(grants, 1), 0) LOOP
    EXECUTE grants[i];
  END LOOP;
  IF to_regclass('pg_temp.sync_runs_far') IS NOT NULL THEN
    INSERT INTO sync_runs (id, subscriber_id, refresh_run_id, started_at, finished_at, cards_seen, inserted,
        updated, unchanged, removed, restored, trigger, status, job_id, email, error_code, error_message)
      OVERRIDING SYSTEM VALUE
      SELECT id, subscriber_id, refresh_run_id, started_at, finished_at, cards_seen, inserted, updated,
        unchanged, removed, restored, trigger, status, job_id, email, error_code, error_message
      FROM sync_runs_far;
  END IF;
END
$$;
