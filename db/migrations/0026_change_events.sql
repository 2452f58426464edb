-- Change events (issue 37, DESIGN §7): the transactional outbox. Every sync that changes a card
-- inserts its events here in the same transaction (db/events/outbox.ts); nothing updates them.
-- id, aggregatetype, aggregateid, type and payload are the columns Debezium's outbox event router
-- reads by default (docs/events.md). The pull feed reads them in (txid, seq) order, showing only
-- the transactions older than every one still running (src/events/feed.ts).
--
-- Partitioned by created_at, one partition per UTC day, like sync_runs (0019): retention
-- (CHANGE_EVENTS_RETENTION_DAYS) drops whole days, never a row, so Debezium sees no DELETE.
-- A partitioned table's primary key must hold the partition key; there is none: ids are random
-- uuids and seq comes from the identity sequence alone. The one index is the feed's order.
--
-- The columns in the order that wastes no alignment padding (uuid, the 8-byte ones, then text).
CREATE TABLE "change_events" (
	"id" uuid DEFAULT gen_random_uuid() NOT NULL,
	"seq" bigint GENERATED ALWAYS AS IDENTITY (sequence name "change_events_seq_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"txid" "xid8" DEFAULT pg_current_xact_id() NOT NULL,
	"subscriber_id" bigint NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	"aggregatetype" text NOT NULL,
	"aggregateid" text NOT NULL,
	"type" text NOT NULL,
	"payload" jsonb NOT NULL,
	CONSTRAINT "change_events_type_valid" CHECK ("change_events"."type" in ('card.added', 'card.changed', 'card.removed', 'card.restored', 'card.conflict'))
) PARTITION BY RANGE ("created_at");
--> statement-breakpoint
CREATE INDEX "change_events_feed_idx" ON "change_events" USING btree ("txid","seq");
--> statement-breakpoint
-- Creates the partition of one UTC day unless there is one, attached afterwards (SHARE UPDATE
-- EXCLUSIVE on change_events, which writers do not wait for), as sync_runs_add_partition does.
-- Returns its name, or null when the day already had one. The bounds are read with 0019's
-- sync_runs_partition_from/to, which read any partition's bounds.
CREATE FUNCTION change_events_add_partition(day date) RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
  name text := 'change_events_p' || to_char(day, 'YYYYMMDD');
  lo timestamptz := day::timestamp AT TIME ZONE 'UTC';
  hi timestamptz := (day + 1)::timestamp AT TIME ZONE 'UTC';
BEGIN
  -- One maintainer at a time (every worker runs the maintenance); not the ledger's key.
  PERFORM pg_advisory_xact_lock(7246118505);
  IF EXISTS (
    SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'change_events'::regclass AND (c.relname = name OR (
      pg_get_expr(c.relpartbound, c.oid) <> 'DEFAULT'
      AND coalesce(sync_runs_partition_from(c.oid), '-infinity') < hi
      AND coalesce(sync_runs_partition_to(c.oid), 'infinity') > lo))
  ) THEN
    RETURN NULL;
  END IF;
  EXECUTE format('CREATE TABLE %I (LIKE change_events INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', name);
  EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (created_at >= %L AND created_at < %L)',
    name, name || '_range', lo, hi);
  EXECUTE format('ALTER TABLE change_events ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', name, lo, hi);
  EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', name, name || '_range');
  RETURN name;
END;
$$;
--> statement-breakpoint
-- Whatever no day holds (the upkeep stopped for a week): never a sync refused for want of a
-- partition. The upkeep deletes its rows past the retention (db/events/partitions.ts).
CREATE TABLE "change_events_default" PARTITION OF "change_events" DEFAULT;
--> statement-breakpoint
DO $$
DECLARE
  d date := (now() AT TIME ZONE 'UTC')::date - 1;
BEGIN
  WHILE d <= (now() AT TIME ZONE 'UTC')::date + 7 LOOP
    PERFORM change_events_add_partition(d);
    d := d + 1;
  END LOOP;
END
$$;
