-- Every sync moves last_seen_at of every present card. With room left on each page, Postgres
-- rewrites such a row in place (a HOT update: last_seen_at is in no index) instead of adding an
-- entry to each of the table's six indexes. Applies to pages written from now on.
ALTER TABLE "saved_cards" SET (fillfactor = 80);
