-- History as of any time (DESIGN §4): every card as it stood at a moment, rebuilt from saved_cards
-- and saved_card_changes, and one row per card version for those who think in dbt snapshots.
--
-- How a card's state at `at` is rebuilt from its row as it is now:
--   * a column takes the `previous` value of the first change after `at` that changed it, else its
--     value now (a change after `at` is exactly what `previous` undoes);
--   * the first change after `at` that added, removed or restored the card says whether it was
--     listed then: `added` — it did not exist yet; `removed` — it was active; `restored` — it was
--     removed, since the time of its last removal at or before `at`;
--   * updated_at is its last content change at or before `at`;
--   * last_seen_at is the last successful sync of its owner at or before `at` (and before its
--     removal), from sync_runs; null when the ledger no longer reaches back that far
--     (SYNC_RUNS_RETENTION_DAYS).
-- Nothing is known of a card before its first sync (first_seen_at): it is not returned. `exact` is
-- false when the answer leans on history written before migration 0008 (no `previous` values) or
-- on pruned runs.
-- Cost for one card: a few probes of saved_card_changes_card_id_idx (its changes after `at`) and,
-- when it was listed after `at`, one of the sync_runs (subscriber_id, started_at) index.
CREATE FUNCTION saved_card_as_of(card bigint, at timestamptz)
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
        c.last_seen_at as now_last_seen_at,
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
--> statement-breakpoint
-- Every card as it stood at `at`: the columns of saved_cards_active, removed_at as known then
-- (null while it was listed), and `exact`. Cards first synced after `at` are not in it.
CREATE FUNCTION saved_cards_as_of(at timestamptz)
RETURNS TABLE (
  id bigint, subscriber_id bigint, bin_number text, card_family text, card_bank_code bigint,
  card_bank_name text, company_id bigint, create_date timestamptz, first_seen_at timestamptz,
  last_seen_at timestamptz, updated_at timestamptz, removed_at timestamptz, exact boolean)
LANGUAGE sql STABLE
AS $$
  select v.* from saved_cards c cross join lateral saved_card_as_of(c.id, $1) v
  where c.first_seen_at <= $1
$$;
--> statement-breakpoint
-- One subscriber's wallet as it stood at `at`: the cards it owned then. Reads only the cards it owns
-- now or that its history names (the subscriber_id indexes), however large the tables.
CREATE FUNCTION saved_cards_as_of(at timestamptz, subscriber bigint)
RETURNS TABLE (
  id bigint, subscriber_id bigint, bin_number text, card_family text, card_bank_code bigint,
  card_bank_name text, company_id bigint, create_date timestamptz, first_seen_at timestamptz,
  last_seen_at timestamptz, updated_at timestamptz, removed_at timestamptz, exact boolean)
LANGUAGE sql STABLE
AS $$
  select v.* from (
    select c.id from saved_cards c where c.subscriber_id = $2
    union
    select h.card_id from saved_card_changes h where h.subscriber_id = $2
  ) candidate
  cross join lateral saved_card_as_of(candidate.id, $1) v
  where v.subscriber_id = $2
$$;
--> statement-breakpoint
-- One row per version of a card while it was listed: valid_from (the sync that made the version)
-- to valid_to (the next version or its removal; null for the current one). Between a removal and a
-- restore there is no row. A move to another subscriber starts a version.
CREATE VIEW saved_card_history AS
  select v.id as card_id, v.subscriber_id, v.bin_number, v.card_family, v.card_bank_code,
    v.card_bank_name, v.company_id, v.create_date, v.first_seen_at, v.updated_at,
    b.valid_from, b.valid_to, b.valid_to is null as is_current, v.exact
  from (
    select d.card_id, d.changed_at as valid_from,
      lead(d.changed_at) over (partition by d.card_id order by d.changed_at) as valid_to
    from (select distinct h.card_id, h.changed_at from saved_card_changes h) d
  ) b
  cross join lateral saved_card_as_of(b.card_id, b.valid_from) v
  where v.removed_at is null;
