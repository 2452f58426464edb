-- A card's first appearance is no longer written out as a history row (issue 28): the card's own row
-- says it (first_seen_at, and the subscriber it was stored for), so the 'added' row, its heap tuple
-- and four index entries repeated it, about 380 bytes of WAL a card on a first sync. saved_card_changes
-- becomes a view with every row it had: the log of the other changes (the table, renamed), and an
-- 'added' row for each card stored from now on, made from three new saved_cards columns:
--   added_change_id      its id, taken from the history's own sequence when the card is stored
--                        (so history ids still ascend with the writes);
--   added_sync_run_id    the run that stored it;
--   added_subscriber_id  whom it was first stored for, set once it moves (null until then).
-- Cards stored before this migration keep their written 'added' row (their added_change_id is null).
-- Rows inserted into saved_card_changes go to the log (an INSTEAD OF trigger). Nothing is copied, so
-- the upgrade holds its locks for a moment only.
ALTER TABLE "saved_cards" ADD COLUMN "added_change_id" bigint;--> statement-breakpoint
ALTER TABLE "saved_cards" ADD COLUMN "added_sync_run_id" bigint;--> statement-breakpoint
ALTER TABLE "saved_cards" ADD COLUMN "added_subscriber_id" bigint;--> statement-breakpoint
CREATE INDEX "saved_cards_added_subscriber_idx" ON "saved_cards" USING btree ("added_subscriber_id") WHERE "saved_cards"."added_subscriber_id" is not null;--> statement-breakpoint
DO $$
DECLARE
  v record;
  g record;
  views text[] := '{}';
  defs text[] := '{}';
  grants text[] := '{}';
BEGIN
  -- Views that read the table (saved_card_history) follow it through the rename: their text is
  -- kept to make them again on the view, and so are the privileges granted on the table.
  FOR v IN
    SELECT DISTINCT dep.oid::regclass::text AS name, pg_get_viewdef(dep.oid) AS def
    FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid JOIN pg_class dep ON dep.oid = r.ev_class
    WHERE d.refobjid = 'saved_card_changes'::regclass AND dep.oid <> 'saved_card_changes'::regclass
  LOOP
    views := views || v.name;
    defs := defs || v.def;
  END LOOP;
  FOR g IN
    SELECT format('GRANT %s ON saved_card_changes TO %s', privilege_type,
      CASE WHEN grantee = 'PUBLIC' THEN 'PUBLIC' ELSE quote_ident(grantee) END) AS stmt
    FROM information_schema.table_privileges
    WHERE table_schema = 'public' AND table_name = 'saved_card_changes' AND grantee <> current_user
      AND privilege_type = 'SELECT'
  LOOP
    grants := grants || g.stmt;
  END LOOP;

  ALTER TABLE saved_card_changes RENAME TO saved_card_change_log;
  CREATE VIEW saved_card_changes AS
    SELECT l.id, l.card_id, l.subscriber_id, l.change, l.changed_fields, l.previous, l.reason,
      l.sync_run_id, l.changed_at
    FROM saved_card_change_log l
    UNION ALL
    -- Two branches, so that a question by subscriber reads an index in each: cards still with the
    -- subscriber they were stored for (saved_cards_subscriber_id_idx), and cards that moved since
    -- (saved_cards_added_subscriber_idx, which holds those alone).
    SELECT c.added_change_id, c.id, c.subscriber_id, 'added'::text,
      NULL::text[], NULL::jsonb, NULL::text, c.added_sync_run_id, c.first_seen_at
    FROM saved_cards c
    WHERE c.added_change_id IS NOT NULL AND c.added_subscriber_id IS NULL
    UNION ALL
    SELECT c.added_change_id, c.id, c.added_subscriber_id, 'added'::text,
      NULL::text[], NULL::jsonb, NULL::text, c.added_sync_run_id, c.first_seen_at
    FROM saved_cards c
    WHERE c.added_change_id IS NOT NULL AND c.added_subscriber_id IS NOT NULL;

  FOR i IN 1 .. coalesce(array_length(views, 1), 0) LOOP
    EXECUTE format('CREATE OR REPLACE VIEW %s AS %s', views[i], defs[i]);
  END LOOP;
  FOR i IN 1 .. coalesce(array_length(grants, 1), 0) LOOP
    EXECUTE grants[i];
  END LOOP;
END
$$;--> statement-breakpoint
CREATE FUNCTION saved_card_changes_insert() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
  INSERT INTO saved_card_change_log (card_id, subscriber_id, change, changed_fields, previous, reason,
    sync_run_id, changed_at)
  VALUES (NEW.card_id, NEW.subscriber_id, NEW.change, NEW.changed_fields, NEW.previous, NEW.reason,
    NEW.sync_run_id, NEW.changed_at)
  RETURNING id INTO NEW.id;
  RETURN NEW;
END;
$$;--> statement-breakpoint
CREATE TRIGGER saved_card_changes_insert INSTEAD OF INSERT ON saved_card_changes
  FOR EACH ROW EXECUTE FUNCTION saved_card_changes_insert();
