ALTER TABLE "breaking_migrations" ADD COLUMN "release" text;--> statement-breakpoint
-- The writer fence (docs/upgrading.md, "The writer fence"). A release's own guard stops it when the
-- database is newer than it knows, but a release that predates the guard, or a cron job pinned to
-- an old image, has none. So the database refuses them: a session may write the tables whose
-- changes are change events only once it has declared (cards_sync.known_migration, set by every
-- connection of a release that knows this fence, db/fence.ts) that it knows the newest breaking
-- migration applied. That migration is written into each trigger (cards_sync_move_fence below
-- moves it, and cards-sync migrate calls it whenever it applies a breaking migration), and the
-- check is the trigger's WHEN condition: two text comparisons once per statement, no function
-- call, no read and no WAL for a session that declares it; the function below runs only to refuse.
-- A tag starts with four digits, so tags compare as text; "< ':'" keeps out what does not start
-- with a digit. Reads are never checked.
CREATE FUNCTION "cards_sync_writer_fence"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  declared text := current_setting('cards_sync.known_migration', true);
BEGIN
  -- Called only when the trigger's WHEN condition found the declaration missing or older; checked
  -- again here so that the function is right on its own.
  IF declared >= TG_ARGV[0] AND declared < ':' THEN
    RETURN NULL;
  END IF;
  RAISE EXCEPTION 'cards-sync: this release may not write %: the database has breaking migration %, which it does not know (it declares %); start %',
      TG_TABLE_NAME, TG_ARGV[0], coalesce(nullif(declared, ''), 'none'),
      coalesce((SELECT 'cards-sync ' || release || ' or newer' FROM breaking_migrations WHERE tag = TG_ARGV[0]),
               'a cards-sync release that ships ' || TG_ARGV[0] || ' or newer')
    USING ERRCODE = 'CSF01',
      HINT = 'An older release writes data that the newer schema''s readers would trust wrongly (docs/upgrading.md, "The writer fence").';
END $$;
--> statement-breakpoint
-- Puts the fence at `tag` on every fenced table: the tables a sync's change events are made from.
CREATE FUNCTION "cards_sync_move_fence"(tag text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  fenced text;
BEGIN
  FOREACH fenced IN ARRAY ARRAY['saved_cards', 'saved_card_change_log', 'card_conflicts'] LOOP
    EXECUTE format(
      'CREATE OR REPLACE TRIGGER "writer_fence" BEFORE INSERT OR UPDATE OR DELETE ON %I FOR EACH STATEMENT '
      'WHEN (NOT coalesce(current_setting(''cards_sync.known_migration'', true) >= %L '
      'AND current_setting(''cards_sync.known_migration'', true) < '':'', false)) '
      'EXECUTE FUNCTION "cards_sync_writer_fence"(%L)',
      fenced, tag, tag);
  END LOOP;
END $$;
--> statement-breakpoint
SELECT "cards_sync_move_fence"('0029_writer_fence');
