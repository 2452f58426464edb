-- saved_cards_as_of after the ledger became a partition a day (migration 0019) and the 'added'
-- history rows a view over saved_cards (migration 0021): the whole table took hours, one wallet half
-- a second. Same signatures and the same answers (docs/analytics.md), but for a run that no sync
-- writes (the end of this comment); what changed is what the plans read.
--
-- The whole table. A card's state was planned as a join of saved_cards with itself (the caller's
-- row and the function's own), and through the view the planner no longer knew how many cards pass
-- `p.change is distinct from 'added'`: it counted one, and joined the 200,000 cards of
-- `npm run bench:history` to a sequential scan of saved_cards each, 20 billion rows. A card's state
-- is now a subquery of its own (OFFSET 0, twice below): planned for one card and found by the
-- caller's id, whatever the estimate. Its last_seen_at is computed once: the column and `exact`
-- each probed the ledger for it before.
--
-- The ledger. last_seen_at at `at` is when the newest (by start) successful run of the card's owner
-- that finished by `at`, and before the card's removal, finished. That probe had no bound on
-- started_at, so every plan held every day of the ledger (90 at the default retention, 375 in the
-- benchmark) and each card read the subscriber index of each: a wallet took 0.3 s to plan and
-- 0.15 s to run. It now reads the runs started from 8 days before `at` to a day after it (nightly,
-- continuous and weekly refreshes all have their answer there). Only when those hold none does it
-- look further back, and only if the ledger holds any older run (sync_runs_started_before, asked
-- once a query when `at` is one value): a week at a time, twice as far each time
-- (sync_runs_last_success). The window's bounds are immutable expressions of `at` (a timestamptz
-- minus an interval is only stable, and would be left to the executor), so with a literal or a
-- bound parameter the planner prunes the other days: a wallet's plan holds about ten days of the
-- ledger, however long it is. An `at` computed in the query (`now() - interval '1 day'`, a column)
-- is pruned as the query runs, after a plan of every day, as before. The older days are read in
-- plpgsql because its EXECUTE is planned with the bounds in hand; written here, they would put
-- every older day into every plan.
--
-- A run that started after `at` and still finished by it exists only if the database's clock went
-- back during that run (started_at and finished_at are both read from it): one that started within
-- a day of `at` still counts, as it did; one that started later is no longer looked for.

-- Whether the ledger holds a run started before `at`.
CREATE FUNCTION sync_runs_started_before(at timestamptz) RETURNS boolean
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
DECLARE
  found boolean;
BEGIN
  EXECUTE 'select exists (select from sync_runs r where r.started_at < $1)' INTO found USING at;
  RETURN found;
END;
$$;
--> statement-breakpoint
-- When the newest successful run of `subscriber` that started before `started_before` finished,
-- provided it finished by `at` and, when `removed` is given, before it. Newest first, a week at a
-- time and then twice as far each time, each step planned for its own days; past about 22 years
-- back, the rest at once.
CREATE FUNCTION sync_runs_last_success(subscriber bigint, at timestamptz, removed timestamptz,
  started_before timestamptz) RETURNS timestamptz
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
DECLARE
  probe constant text := 'select r.finished_at from sync_runs r
    where r.subscriber_id = $1 and r.status = ''succeeded'' and r.finished_at <= $2
      and ($3 is null or r.finished_at < $3) and r.started_at >= $4 and r.started_at < $5
    order by r.started_at desc limit 1';
  hi timestamptz := started_before;
  span interval := interval '8 days';
  found timestamptz;
BEGIN
  FOR step IN 1..10 LOOP
    EXECUTE probe INTO found USING subscriber, at, removed, hi - span, hi;
    IF found IS NOT NULL THEN
      RETURN found;
    END IF;
    hi := hi - span;
    span := span * 2;
  END LOOP;
  EXECUTE probe INTO found USING subscriber, at, removed, '-infinity'::timestamptz, hi;
  RETURN found;
END;
$$;
--> statement-breakpoint
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
      case when b.now_last_seen_at <= $2 then b.now_last_seen_at else coalesce((
        select r.finished_at from sync_runs r
        where r.subscriber_id = b.subscriber_id and r.status = 'succeeded' and r.finished_at <= $2
          and (b.removed_at is null or r.finished_at < b.removed_at)
          and r.started_at >= ($2 at time zone 'UTC' - interval '8 days') at time zone 'UTC'
          and r.started_at < ($2 at time zone 'UTC' + interval '1 day') at time zone 'UTC'
        order by r.started_at desc limit 1
      ), case when (select sync_runs_started_before(
          ($2 at time zone 'UTC' - interval '8 days') at time zone 'UTC'))
        then sync_runs_last_success(b.subscriber_id, $2, b.removed_at,
          ($2 at time zone 'UTC' - interval '8 days') at time zone 'UTC')
      end) end as last_seen_at
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
        -- An active card's last_seen_at is carried by its owner's last success (docs/analytics.md).
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
      -- A subquery of its own: the probes above read its columns, not copies of their expressions
      -- (planning copies a probe's conditions into each day it reads).
      offset 0
    ) b
    -- Planned for one card, never flattened into the caller's join; last_seen_at computed once, for
    -- its column and for `exact`.
    offset 0
  ) s
$$;
