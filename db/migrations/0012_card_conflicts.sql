-- A card listed by two subscribers at once is a conflict (issue 25): it stays with its holder,
-- card_conflicts keeps the episode, and the claimant's history gets a `conflict` row. Such a row
-- changes no column, so it starts no version in saved_card_history.
CREATE TABLE "card_conflicts" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "card_conflicts_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"card_id" bigint NOT NULL,
	"holder_subscriber_id" bigint NOT NULL,
	"claimant_subscriber_id" bigint NOT NULL,
	"opened_at" timestamp with time zone NOT NULL,
	"last_seen_at" timestamp with time zone NOT NULL,
	"resolved_at" timestamp with time zone,
	"resolution" text,
	CONSTRAINT "card_conflicts_resolution_valid" CHECK ("card_conflicts"."resolution" in ('claimant_dropped', 'moved'))
);
--> statement-breakpoint
ALTER TABLE "saved_card_changes" DROP CONSTRAINT "saved_card_changes_change_valid";--> statement-breakpoint
CREATE UNIQUE INDEX "card_conflicts_open_idx" ON "card_conflicts" USING btree ("card_id","claimant_subscriber_id") WHERE "card_conflicts"."resolved_at" is null;--> statement-breakpoint
CREATE INDEX "card_conflicts_open_claimant_idx" ON "card_conflicts" USING btree ("claimant_subscriber_id") WHERE "card_conflicts"."resolved_at" is null;--> statement-breakpoint
ALTER TABLE "saved_card_changes" ADD CONSTRAINT "saved_card_changes_change_valid" CHECK ("saved_card_changes"."change" in ('added', 'updated', 'removed', 'restored', 'conflict'));--> statement-breakpoint
CREATE OR REPLACE VIEW saved_card_history AS
  select v.id as card_id, v.subscriber_id, v.bin_number, v.card_family, v.card_bank_code,
    v.card_bank_name, v.company_id, v.create_date, v.first_seen_at, v.updated_at,
    b.valid_from, b.valid_to, b.valid_to is null as is_current, v.exact
  from (
    select d.card_id, d.changed_at as valid_from,
      lead(d.changed_at) over (partition by d.card_id order by d.changed_at) as valid_to
    from (select distinct h.card_id, h.changed_at from saved_card_changes h where h.change <> 'conflict') d
  ) b
  cross join lateral saved_card_as_of(b.card_id, b.valid_from) v
  where v.removed_at is null;