-- Indexes that served no query of the product (issue 28), each a B-tree entry and 66 bytes of WAL
-- for every card written: active cards by subscriber (saved_cards_subscriber_id_idx serves the
-- same lookups), bank code, company and create_date (analysts' reports group by them, which reads
-- the table either way; bring one back with CREATE INDEX CONCURRENTLY if you look single values up
-- on a large table), and history by sync run (the subscriber page now finds a run's changes
-- through the subscriber's history index). A DROP INDEX holds its table's lock for a moment only.
DROP INDEX "saved_card_changes_sync_run_id_idx";--> statement-breakpoint
DROP INDEX "saved_cards_active_subscriber_idx";--> statement-breakpoint
DROP INDEX "saved_cards_card_bank_code_idx";--> statement-breakpoint
DROP INDEX "saved_cards_company_id_idx";--> statement-breakpoint
DROP INDEX "saved_cards_create_date_idx";