-- The continuous refresh's due times move to a narrow table of their own (issue 36): with
-- next_refresh_at indexed on subscribers, every sync's update of that wide row was a new version
-- with an entry in each of its indexes (no HOT update). subscribers.next_refresh_at stays, as the
-- plan the last sync made (no longer indexed, so a sync's update of the row is HOT again);
-- subscriber_schedule.due_at is where the scheduler looks (db/schema/subscribers.ts says how the
-- two relate). Each subscriber's row is copied with its due time, then indexed.
CREATE TABLE "subscriber_schedule" (
	"subscriber_id" bigint PRIMARY KEY NOT NULL,
	"due_at" timestamp with time zone
);
--> statement-breakpoint
INSERT INTO "subscriber_schedule" ("subscriber_id", "due_at")
  SELECT "subscriber_id", "next_refresh_at" FROM "subscribers";--> statement-breakpoint
DROP INDEX "subscribers_next_refresh_idx";--> statement-breakpoint
CREATE INDEX "subscriber_schedule_due_idx" ON "subscriber_schedule" USING btree ("due_at" NULLS FIRST,"subscriber_id");--> statement-breakpoint
-- Every subscriber has its row, however it was inserted (a worker of an earlier release included):
-- a new one is due when its first plan says, or first in line. No foreign key (db/schema/subscribers.ts
-- says why): a row left by a subscriber deleted or truncated is reset when the id comes again.
CREATE FUNCTION "subscriber_schedule_insert"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO subscriber_schedule (subscriber_id, due_at) VALUES (NEW.subscriber_id, NEW.next_refresh_at)
    ON CONFLICT (subscriber_id) DO UPDATE SET due_at = EXCLUDED.due_at;
  RETURN NULL;
END
$$;--> statement-breakpoint
CREATE TRIGGER "subscribers_schedule_row" AFTER INSERT ON "subscribers"
  FOR EACH ROW EXECUTE FUNCTION "subscriber_schedule_insert"();--> statement-breakpoint
-- A plan that comes sooner than the scheduler's due time moves it, whoever wrote the plan (a sync
-- of this release, of an earlier one during a rolling upgrade, a person's UPDATE). A later plan is
-- left for the claim that reaches the row to catch up (db/ops/refresh-schedule.ts), so an unchanged
-- sync, which plans later, writes no schedule row. A null due time is first in line already.
CREATE FUNCTION "subscriber_schedule_sooner"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE subscriber_schedule SET due_at = NEW.next_refresh_at
    WHERE subscriber_id = NEW.subscriber_id AND due_at > NEW.next_refresh_at;
  RETURN NULL;
END
$$;--> statement-breakpoint
CREATE TRIGGER "subscribers_schedule_sooner" AFTER UPDATE OF "next_refresh_at" ON "subscribers"
  FOR EACH ROW WHEN (NEW.next_refresh_at IS DISTINCT FROM OLD.next_refresh_at)
  EXECUTE FUNCTION "subscriber_schedule_sooner"();--> statement-breakpoint
-- Ids and due times only: the reporting role reads it as it reads subscribers (db/reporting-role.sql).
DO $$
BEGIN
  IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'cards_sync_reporting') THEN
    GRANT SELECT ON "subscriber_schedule" TO cards_sync_reporting;
  END IF;
END
$$;
