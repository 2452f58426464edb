-- Every sync moves last_seen_at of every present card, and the sync timestamps of its subscriber.
-- With room for a second version of each row on its page, Postgres rewrites such a row in place
-- (a HOT update: none of those columns is in an index) instead of adding an entry to each of the
-- table's indexes, six of them on saved_cards. A nightly refresh touches every row once, so the
-- room is half a page. Applies to pages written from now on.
ALTER TABLE "saved_cards" SET (fillfactor = 50);--> statement-breakpoint
ALTER TABLE "subscribers" SET (fillfactor = 50);
