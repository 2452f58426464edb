// The one statement that writes a batch of syncs (db/sync/batch-write.ts sends it): its text does
// not depend on the batch, so each connection prepares it once.

// A sealed token is compared by its fingerprint (two sealings of one token never match); an
// unchanged token arrives here in its stored form, fingerprint and all.
const contentChanged = `(
    c.subscriber_id, coalesce(c.card_token_fingerprint, c.card_token), c.bin_number, c.card_family,
    c.card_bank_code, c.card_bank_name, c.company_id, c.create_date
  ) is distinct from (
    excluded.subscriber_id, coalesce(excluded.card_token_fingerprint, excluded.card_token),
    excluded.bin_number, excluded.card_family, excluded.card_bank_code, excluded.card_bank_name,
    excluded.company_id, excluded.create_date
  )`;

// Every column travels as one array parameter (unnest): no parameter limit, a statement text that
// does not depend on the batch (so it is prepared once per connection), and no per-value work in
// a query builder. The parts touch disjoint rows (the caller makes sure of it), which is what
// lets them share one statement and its one snapshot.
export const WRITE_BATCH = `
with removed as (
  -- An active card's last_seen_at is carried by its subscriber's last success (docs/analytics.md), the
  -- last sync that listed it: its own column takes that value as it leaves. The subquery sees the
  -- row as it was before this statement, the success before this one.
  -- By = any($12), not a join with unnest, and with the owners as a condition of their own: a
  -- plan cached while the table was small kept a hash join over a scan of all of it, or read the
  -- whole partial index of active cards (removed_at is null) once a batch, 1.3 billion index
  -- entries in a first sync of 80,000 subscribers. Whichever index it takes now, it has a key.
  update saved_cards c set removed_at = $1, last_seen_at = greatest(c.last_seen_at, (
      select o.last_success_at from subscribers o where o.subscriber_id = c.subscriber_id))
    where c.id = any($12::bigint[]) and c.subscriber_id = any($13::bigint[]) and c.removed_at is null
      and c.subscriber_id = ($13::bigint[])[array_position($12::bigint[], c.id)]
    returning c.id, c.subscriber_id
), item as (
  select * from unnest($14::bigint[], $15::text[], $16::text[], $17::text[], $18::bigint[],
      $19::timestamptz[], $20::text[], $21::int[], $22::int[], $23::int[], $24::int[], $25::int[],
      $26::text[], $27::text[])
    with ordinality as i(subscriber_id, email, trigger, job_id, refresh_run_id, started_at, status,
      cards_seen, inserted, updated, unchanged, restored, error_code, error_message, ord)
), run as (
  insert into sync_runs (subscriber_id, email, trigger, job_id, refresh_run_id, started_at,
      finished_at, status, cards_seen, inserted, updated, unchanged, removed, restored, error_code,
      error_message)
    select i.subscriber_id, i.email, i.trigger,
      -- An unchanged success, the common run, keeps no job id: its job is gone from Redis, and who,
      -- when and why are in subscriber_id, started_at, trigger and refresh_run_id. Any run that
      -- changed a card or did not succeed keeps it (its log lines and a kept failed job carry it).
      case when i.status = 'succeeded' and i.inserted + i.updated + i.restored + i.removed = 0 then null
        else i.job_id end,
      i.refresh_run_id, i.started_at, $1, i.status,
      i.cards_seen, i.inserted, i.updated, i.unchanged, i.removed, i.restored, i.error_code, i.error_message
    from (select i.*, (select count(*) from removed r where r.subscriber_id = i.subscriber_id)::int as removed
      from item i) i
    -- Inserted in item order, so the ids ascend with it (run_of below relies on that).
    order by i.ord
    returning id
), run_of as (
  select id, row_number() over (order by id) as ord from run
), upserted as (
  -- A card stored for the first time carries its own 'added' history row (the saved_card_changes
  -- view makes it from added_change_id, added_sync_run_id and first_seen_at): no row is written
  -- to say what the card's row already says.
  insert into saved_cards as c (id, subscriber_id, card_token, card_token_fingerprint, bin_number,
      card_family, card_bank_code, card_bank_name, company_id, create_date, first_seen_at, last_seen_at,
      updated_at, removed_at, added_change_id, added_sync_run_id)
    select u.id, u.subscriber_id, u.card_token, u.fingerprint, u.bin_number, u.card_family,
      u.card_bank_code, u.card_bank_name, u.company_id, u.create_date,
      $1::timestamptz, $1::timestamptz, $1::timestamptz, null::timestamptz,
      case when u.added_by is not null then nextval('saved_card_changes_id_seq') end, r.id
    from unnest($2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::text[],
      $9::bigint[], $10::timestamptz[], $35::text[], $41::int[])
      as u(id, subscriber_id, card_token, bin_number, card_family, card_bank_code, card_bank_name,
        company_id, create_date, fingerprint, added_by)
    left join run_of r on r.ord = u.added_by
    order by u.id
  on conflict (id) do update set
    -- A card that moves keeps, in added_subscriber_id, whom it was first stored for.
    added_subscriber_id = case when c.added_change_id is not null and c.subscriber_id <> excluded.subscriber_id
      then coalesce(c.added_subscriber_id, c.subscriber_id) else c.added_subscriber_id end,
    subscriber_id = excluded.subscriber_id, card_token = excluded.card_token,
    card_token_fingerprint = excluded.card_token_fingerprint,
    bin_number = excluded.bin_number, card_family = excluded.card_family,
    card_bank_code = excluded.card_bank_code, card_bank_name = excluded.card_bank_name,
    company_id = excluded.company_id, create_date = excluded.create_date,
    last_seen_at = excluded.last_seen_at,
    updated_at = case when ${contentChanged} then excluded.updated_at else c.updated_at end,
    removed_at = null
  -- An identical, present row is not rewritten.
  where ${contentChanged} or c.removed_at is not null
  returning c.id
), changed as (
  -- In answer order, then the removals: history ids read like the answers did, after the ids the
  -- new cards took for their 'added' rows (reading upserted makes its insert come first).
  insert into saved_card_change_log (card_id, subscriber_id, change, changed_fields, previous, reason,
      sync_run_id, changed_at)
    select card_id, subscriber_id, change, string_to_array(fields, ','), previous::jsonb, reason, sync_run_id, $1
    from (
      select ch.card_id, ch.subscriber_id, ch.change, ch.fields, ch.previous, ch.reason,
          run_of.id as sync_run_id, 0 as part, ch.n as seq
        from unnest($28::bigint[], $29::bigint[], $30::text[], $31::text[], $32::bigint[], $36::text[],
            $37::text[])
          with ordinality as ch(card_id, subscriber_id, change, fields, ord, previous, reason, n)
        join run_of using (ord)
      union all
      select r.id, r.subscriber_id, 'removed', null, null, null, run_of.id, 1, r.id
        from removed r join item i on i.subscriber_id = r.subscriber_id join run_of on run_of.ord = i.ord
    ) change_rows
    where (select count(*) from upserted) >= 0
    order by part, seq
), sub as (
  -- Observations as array text: unnest would flatten an array of arrays.
  select * from unnest($33::bigint[], $34::int[], $11::text[], $38::float8[], $39::timestamptz[], $40::text[],
      $42::float8[])
    as sub(subscriber_id, active_cards, digest, rate, next_refresh_at, observations, stale_rate)
), subscriber as (
  -- A subscriber stored before: a plain UPDATE, not INSERT … ON CONFLICT, whose conflict path
  -- locks the row before it updates it, a WAL record of its own (54 bytes a sync). By
  -- = any($33) so that the plan has a key whatever the batch. s.* is the row as the update finds
  -- it, after any transaction that changed it meanwhile.
  update subscribers s set last_synced_at = $1, last_success_at = $1, last_status = 'succeeded',
    last_error = null, consecutive_failures = 0,
    -- A null digest: the answer was identical (see Success.digest).
    active_cards = case when sub.digest is null then s.active_cards else sub.active_cards end,
    cards_digest = coalesce(sub.digest, s.cards_digest),
    consecutive_not_found = 0, gone_at = null,
    change_rate_per_day = sub.rate, stale_rate_per_day = sub.stale_rate, next_refresh_at = sub.next_refresh_at,
    change_observations = sub.observations::real[]
  from sub where s.subscriber_id = any($33::bigint[]) and s.subscriber_id = sub.subscriber_id
  returning s.subscriber_id
), new_subscriber as (
  insert into subscribers as s (subscriber_id, email, last_synced_at, last_success_at, last_status,
      last_error, consecutive_failures, active_cards, cards_digest, change_rate_per_day,
      stale_rate_per_day, next_refresh_at, change_observations)
    select sub.subscriber_id, null, $1, $1, 'succeeded', null, 0, sub.active_cards, sub.digest,
      sub.rate, sub.stale_rate, sub.next_refresh_at, sub.observations::real[]
    from sub where sub.subscriber_id not in (select subscriber_id from subscriber)
    order by sub.subscriber_id
  -- One inserted meanwhile by another transaction.
  on conflict (subscriber_id) do update set
    last_synced_at = excluded.last_synced_at, last_success_at = excluded.last_success_at,
    last_status = excluded.last_status, last_error = null, consecutive_failures = 0,
    active_cards = case when excluded.cards_digest is null then s.active_cards else excluded.active_cards end,
    cards_digest = coalesce(excluded.cards_digest, s.cards_digest),
    consecutive_not_found = 0, gone_at = null,
    change_rate_per_day = excluded.change_rate_per_day, stale_rate_per_day = excluded.stale_rate_per_day,
    next_refresh_at = excluded.next_refresh_at, change_observations = excluded.change_observations
)
-- For a run: its position in the batch; for a removed card: its subscriber.
select 'run' as kind, id, ord as ref from run_of
union all
select 'removed', id, subscriber_id from removed`;
