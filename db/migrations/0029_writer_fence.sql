ALTER TABLE "breaking_migrations" ADD COLUMN "release" text;--> statement-breakpoint
-- The writer fence (docs/upgrading.md, "The writer fence"). A release's own guard stops it when the
-- database is newer than it knows, but a release that predates the guard, or a cron job pinned to
-- an old image, has none. So the database refuses them: a session may write the tables a sync
-- writes only once it has declared (cards_sync.known_migration, set by every connection of a
-- release that knows this fence, db/fence.ts) that it knows the newest breaking migration applied.
-- Statement-level: one check per statement, nothing per row, no WAL. Reads are never checked.
CREATE FUNCTION "cards_sync_writer_fence"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  declared text := current_setting('cards_sync.known_migration', true);
  newest record;
BEGIN
  SELECT tag, release INTO newest FROM breaking_migrations ORDER BY tag DESC LIMIT 1;
  IF newest.tag IS NULL
     OR (declared ~ '^[0-9]+_' AND split_part(declared, '_', 1)::int >= split_part(newest.tag, '_', 1)::int) THEN
    RETURN NULL;
  END IF;
  RAISE EXCEPTION 'cards-sync: this release may not write %: the database has breaking migration %, which it does not know (it declares %); start %',
      TG_TABLE_NAME, newest.tag, coalesce(nullif(declared, ''), 'none'),
      coalesce('cards-sync ' || newest.release || ' or newer', 'a cards-sync release that ships ' || newest.tag || ' or newer')
    USING ERRCODE = 'CSF01',
      HINT = 'An older release writes data that the newer schema''s readers would trust wrongly (docs/upgrading.md, "The writer fence").';
END $$;
--> statement-breakpoint
CREATE TRIGGER "writer_fence" BEFORE INSERT OR UPDATE OR DELETE ON "saved_cards" FOR EACH STATEMENT EXECUTE FUNCTION "cards_sync_writer_fence"();
--> statement-breakpoint
CREATE TRIGGER "writer_fence" BEFORE INSERT OR UPDATE OR DELETE ON "saved_card_change_log" FOR EACH STATEMENT EXECUTE FUNCTION "cards_sync_writer_fence"();
--> statement-breakpoint
CREATE TRIGGER "writer_fence" BEFORE INSERT OR UPDATE OR DELETE ON "card_conflicts" FOR EACH STATEMENT EXECUTE FUNCTION "cards_sync_writer_fence"();
--> statement-breakpoint
CREATE TRIGGER "writer_fence" BEFORE INSERT OR UPDATE OR DELETE ON "subscribers" FOR EACH STATEMENT EXECUTE FUNCTION "cards_sync_writer_fence"();
--> statement-breakpoint
CREATE TRIGGER "writer_fence" BEFORE INSERT OR UPDATE OR DELETE ON "subscriber_schedule" FOR EACH STATEMENT EXECUTE FUNCTION "cards_sync_writer_fence"();
