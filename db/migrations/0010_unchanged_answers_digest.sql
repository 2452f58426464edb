-- The unchanged path (issue 18): an answer identical to what is stored reads and writes no card.
--   * subscribers.cards_digest: the digest of the cards the last full-path success listed;
--   * an active card's last_seen_at is no longer rewritten by every sync: the subscriber's
--     last_success_at carries it, and saved_cards_active and saved_card_as_of take the later of
--     the two. A card's own column is brought up to date when it is removed.
-- CREATE OR REPLACE keeps the view's and the function's grants (db/reporting-role.sql).
ALTER TABLE "subscribers" ADD COLUMN "cards_digest" text;--> statement-breakpoint
CREATE OR REPLACE VIEW "public"."saved_cards_active" AS (select "saved_cards"."id", "saved_cards"."subscriber_id", "saved_cards"."bin_number", "saved_cards"."card_family", "saved_cards"."card_bank_code", "saved_cards"."card_bank_name", "saved_cards"."company_id", "saved_cards"."create_date", "saved_cards"."first_seen_at", greatest("saved_cards"."last_seen_at", "subscribers"."last_success_at") as "last_seen_at", "saved_cards"."updated_at" from "saved_cards" left join "subscribers" on "subscribers"."subscriber_id" = "saved_cards"."subscriber_id" where "saved_cards"."removed_at" is null);--> statement-breakpoint
CREATE OR REPLACE FUNCTION saved_card_as_of(card bigint, at timestamptz)
RETURNS TABLE (
  id bigint, subscriber_id bigint, bin_number text, card_family text, card_bank_code bigint,
  card_bank_name text, company_id bigint, create_date timestamptz, first_seen_at timestamptz,
  last_seen_at timestamptz, updated_at timestamptz, removed_at timestamptz, exact boolean)
LANGUAGE sql STABLE
AS $$
  select s.id, s.subscriber_id, s.bin_number, s.card_family, s.card_bank_code, s.card_bank_name,
    s.company_id, s.create_date, s.first_seen_at, s.last_seen_at, s.updated_at, s.removed_at,
    s.known and s.last_seen_at is not null
  from (
    select b.*,
      case when b.now_last_seen_at <= $2 then b.now_last_seen_at else (
        select r.finished_at from sync_runs r
        where r.subscriber_id = b.subscriber_id and r.status = 'succeeded' and r.finished_at <= $2
          and (b.removed_at is null or r.finished_at < b.removed_at)
        order by r.started_at desc limit 1
      ) end as last_seen_at
    from (
      select c.id,
        coalesce((u.prev ->> 'subscriber_id')::bigint, c.subscriber_id) as subscriber_id,
        coalesce(u.prev ->> 'bin_number', c.bin_number) as bin_number,
        coalesce(u.prev ->> 'card_family', c.card_family) as card_family,
        coalesce((u.prev ->> 'card_bank_code')::bigint, c.card_bank_code) as card_bank_code,
        coalesce(u.prev ->> 'card_bank_name', c.card_bank_name) as card_bank_name,
        coalesce((u.prev ->> 'company_id')::bigint, c.company_id) as company_id,
        coalesce((u.prev ->> 'create_date')::timestamptz, c.create_date) as create_date,
        c.first_seen_at,
        -- An active card's last_seen_at is carried by its owner's last success (DESIGN §4).
        case when c.removed_at is null then greatest(c.last_seen_at, (
          select o.last_success_at from subscribers o where o.subscriber_id = c.subscriber_id
        )) else c.last_seen_at end as now_last_seen_at,
        case when c.updated_at <= $2 then c.updated_at else (
          select max(h.changed_at) from saved_card_changes h
          where h.card_id = c.id and h.changed_at <= $2
            and (h.change = 'added' or cardinality(h.changed_fields) > 0)
        ) end as updated_at,
        case p.change
          when 'removed' then null
          when 'restored' then coalesce((p.previous ->> 'removed_at')::timestamptz, (
            select max(h.changed_at) from saved_card_changes h
            where h.card_id = c.id and h.change = 'removed' and h.changed_at <= $2))
          else c.removed_at
        end as removed_at,
        not coalesce(u.unknown, false) as known
      from saved_cards c
      left join lateral (
        -- The first change after `at` of each column, and the value it replaced.
        select jsonb_object_agg(f.field, f.value) as prev, bool_or(f.value is null) as unknown
        from (
          select distinct on (fld) fld as field, h.previous -> fld as value
          from saved_card_changes h cross join lateral unnest(h.changed_fields) as fld
          where h.card_id = c.id and h.changed_at > $2 and h.change in ('updated', 'restored')
            and fld <> 'card_token'
          order by fld, h.changed_at, h.id
        ) f
      ) u on true
      left join lateral (
        select h.change, h.previous from saved_card_changes h
        where h.card_id = c.id and h.changed_at > $2 and h.change in ('added', 'removed', 'restored')
        order by h.changed_at, h.id limit 1
      ) p on true
      where c.id = $1 and c.first_seen_at <= $2 and p.change is distinct from 'added'
    ) b
  ) s
$$;
