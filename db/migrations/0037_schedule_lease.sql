-- A claim's hold on a subscriber moves out of due_at into a column of its own, not indexed (issue
-- 55): a claim moved due_at to the hold's end, a write with an entry in both of the schedule's
-- indexes, and the sync then moved it again to its plan (or the claim, finding the row behind that
-- plan, caught it up): two such writes a continuous sync. Now the claim writes leased_until, a HOT
-- update (no index entry), and the sync's write of its plan ends the hold. due_at keeps what it
-- meant to an earlier release: when the subscriber is due, never later; a held row is skipped by
-- the claims of this release until its hold ends (db/refresh/schedule.ts).
ALTER TABLE "subscriber_schedule" ADD COLUMN "leased_until" timestamp (3) with time zone;--> statement-breakpoint
-- Room on every page for the claim's new row version: a HOT update must find it on the row's own
-- page, and at the default fillfactor (100) the pages filled and 65% of the claims' writes went
-- elsewhere, non-HOT (`npm run bench:wal-cli`, 300 s of continuous refresh: 912 bytes of records a
-- sync at 100, 826 at 50). Pages filled from now on keep half free; the table is narrow.
ALTER TABLE "subscriber_schedule" SET (fillfactor = 50);--> statement-breakpoint
-- A sync (its last_synced_at moved, whichever release runs it) of a held row hands the row its
-- plan, or, a failed sync that planned nothing, the hold's end, and ends the hold; a sync of a row
-- not held, and any other writer of the plan (a cap, a person's UPDATE), moves due_at only sooner,
-- as before: a later plan is left for the claim that reaches the row to catch up, so that a nightly
-- sync, which plans later and is never held, writes no schedule row.
CREATE OR REPLACE FUNCTION "subscriber_schedule_sooner"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.last_synced_at IS DISTINCT FROM OLD.last_synced_at THEN
    UPDATE subscriber_schedule
      SET due_at = CASE WHEN NEW.next_refresh_at IS DISTINCT FROM OLD.next_refresh_at
          THEN coalesce(NEW.next_refresh_at, leased_until) ELSE leased_until END,
        leased_until = NULL
      WHERE subscriber_id = NEW.subscriber_id AND leased_until IS NOT NULL;
    IF FOUND THEN
      RETURN NULL;
    END IF;
  END IF;
  IF NEW.next_refresh_at IS DISTINCT FROM OLD.next_refresh_at THEN
    UPDATE subscriber_schedule SET due_at = NEW.next_refresh_at
      WHERE subscriber_id = NEW.subscriber_id AND due_at > NEW.next_refresh_at;
  END IF;
  RETURN NULL;
END
$$;--> statement-breakpoint
DROP TRIGGER "subscribers_schedule_sooner" ON "subscribers";--> statement-breakpoint
CREATE TRIGGER "subscribers_schedule_sooner" AFTER UPDATE OF "next_refresh_at", "last_synced_at" ON "subscribers"
  FOR EACH ROW WHEN (NEW.next_refresh_at IS DISTINCT FROM OLD.next_refresh_at
    OR NEW.last_synced_at IS DISTINCT FROM OLD.last_synced_at)
  EXECUTE FUNCTION "subscriber_schedule_sooner"();--> statement-breakpoint
-- A subscriber inserted again starts unheld.
CREATE OR REPLACE FUNCTION "subscriber_schedule_insert"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO subscriber_schedule (subscriber_id, due_at) VALUES (NEW.subscriber_id, NEW.next_refresh_at)
    ON CONFLICT (subscriber_id) DO UPDATE SET due_at = EXCLUDED.due_at, leased_until = NULL;
  RETURN NULL;
END
$$;
