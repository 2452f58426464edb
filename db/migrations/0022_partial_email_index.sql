-- The unique e-mail index holds only rows with an e-mail (issue 28). A subscriber known by id alone
-- has none, yet wrote an entry of its null e-mail on its first sync and on every sync after that
-- moves its row (next_refresh_at is indexed, so those updates are not HOT): 66 bytes of WAL each,
-- for an entry no lookup reads (lower(email) = x never matches a null, and unique ignores nulls).
-- `cards-sync migrate` builds the new index CONCURRENTLY before this file runs (db/prepare.ts), so
-- that here it is only swapped in; run otherwise, or after a build that did not finish (an invalid
-- index), it is built here, holding writes to subscribers for the time of the build.
DROP INDEX "subscribers_email_lower_idx";--> statement-breakpoint
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_index WHERE indexrelid = to_regclass('public.subscribers_email_lower_next_idx') AND indisvalid) THEN
    ALTER INDEX subscribers_email_lower_next_idx RENAME TO subscribers_email_lower_idx;
  ELSE
    DROP INDEX IF EXISTS subscribers_email_lower_next_idx;
  END IF;
END
$$;--> statement-breakpoint
CREATE UNIQUE INDEX IF NOT EXISTS "subscribers_email_lower_idx" ON "subscribers" USING btree (lower("email")) WHERE "subscribers"."email" is not null;
