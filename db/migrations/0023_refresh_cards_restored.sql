-- The view first: it may wait behind an analyst's long query on it, and should not hold
-- refresh_runs meanwhile.
-- One name for a card's id wherever card rows are returned: `id`, as in saved_cards,
-- saved_cards_active and saved_cards_as_of. saved_card_history called it `card_id`; that column
-- stays (queries are written against it), and `id` is added beside it (a view gains columns only
-- at its end).
CREATE OR REPLACE VIEW saved_card_history AS
  select v.id as card_id, v.subscriber_id, v.bin_number, v.card_family, v.card_bank_code,
    v.card_bank_name, v.company_id, v.create_date, v.first_seen_at, v.updated_at,
    b.valid_from, b.valid_to, b.valid_to is null as is_current, v.exact, v.id
  from (
    select d.card_id, d.changed_at as valid_from,
      lead(d.changed_at) over (partition by d.card_id order by d.changed_at) as valid_to
    from (select distinct h.card_id, h.changed_at from saved_card_changes h where h.change <> 'conflict') d
  ) b
  cross join lateral saved_card_as_of(b.card_id, b.valid_from) v
  where v.removed_at is null;--> statement-breakpoint
-- A refresh run counts cards listed again apart from cards stored for the first time (issue 29):
-- `cards_added` counted both. Runs closed before this keep that sum in `cards_added`.
ALTER TABLE "refresh_runs" ADD COLUMN "cards_restored" integer DEFAULT 0 NOT NULL;
