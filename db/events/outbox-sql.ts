// The outbox statement (db/events/outbox.ts sends it): its text does not depend on the batch, so
// each connection prepares it once.

/** The channel the outbox notifies at commit, and long polls listen on. */
export const CHANGES_CHANNEL = 'cards_sync_changes';

// History keeps column names; events speak the API's field names (docs/architecture.md).
const FIELD_NAMES: Record<string, string> = {
  subscriber_id: 'subscriberId',
  card_token: 'cardToken',
  bin_number: 'binNumber',
  card_family: 'cardFamily',
  card_bank_code: 'cardBankCode',
  card_bank_name: 'cardBankName',
  company_id: 'companyId',
  create_date: 'createDate',
};
const fieldName = `case f ${Object.entries(FIELD_NAMES)
  .map(([column, field]) => `when '${column}' then '${field}'`)
  .join(' ')} end`;

// A UTC instant as the events write it: seconds for the card's createDate (upstream has no more).
const utc = (value: string) =>
  `to_char((${value})::timestamptz at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')`;

// The new value of one changed column, as JSON, read from the card's row as this write left it.
// The token is never read: its entry says only that it changed.
const newValue = `case f
    when 'subscriber_id' then to_jsonb(c.subscriber_id)
    when 'bin_number' then to_jsonb(c.bin_number)
    when 'card_family' then to_jsonb(c.card_family)
    when 'card_bank_code' then to_jsonb(c.card_bank_code)
    when 'card_bank_name' then to_jsonb(c.card_bank_name)
    when 'company_id' then to_jsonb(c.company_id)
    when 'create_date' then to_jsonb(${utc('c.create_date')})
  end`;
const oldValue = `case f when 'create_date' then to_jsonb(${utc("e.previous ->> 'create_date'")})
    else e.previous -> f end`;

/**
 * Inserts one event per change this transaction wrote for these subscribers at this instant: the
 * history rows it inserted ($1: subscribers, $2: the write's `changed_at`; $3: null, or while
 * tracing is on each subscriber's sync's trace context, in $1's order) and the cards it stored
 * for the first time (whose `added` row is the card's own, migration 0021). Rows are this
 * transaction's by their xmin, so a concurrent writer's rows at the same instant are never taken.
 * Events follow the history's ids (an added card's `added_change_id` comes from the same
 * sequence), the order in which history reads. When it inserted any, the listeners of
 * CHANGES_CHANNEL are told at commit (a NOTIFY is delivered only if the transaction commits).
 * Answers one row: `types`, how many events of each type it wrote.
 */
export const WRITE_EVENTS = `
with mine as (
  select l.id as ord, l.subscriber_id, l.card_id, l.change, l.changed_fields, l.previous, l.reason,
      l.sync_run_id
    from saved_card_change_log l
    where l.subscriber_id = any($1::bigint[]) and l.changed_at = $2
      and l.xmin = pg_current_xact_id()::xid
  union all
  select c.added_change_id, c.subscriber_id, c.id, 'added', null, null, null, c.added_sync_run_id
    from saved_cards c
    where c.subscriber_id = any($1::bigint[]) and c.first_seen_at = $2 and c.added_change_id is not null
      and c.xmin = pg_current_xact_id()::xid
), inserted as (
  insert into change_events (subscriber_id, created_at, aggregatetype, aggregateid, type, payload,
      tracingspancontext)
    select e.subscriber_id, $2, 'subscriber', e.subscriber_id::text,
      case e.change when 'updated' then 'card.changed' else 'card.' || e.change end,
      jsonb_build_object(
        'subscriberId', e.subscriber_id, 'cardId', e.card_id, 'binNumber', c.bin_number,
        'cardBankCode', c.card_bank_code, 'cardBankName', c.card_bank_name,
        'cardFamily', c.card_family, 'companyId', c.company_id,
        'createDate', ${utc('c.create_date')},
        'changes', case when e.changed_fields is null then null else (
          select jsonb_object_agg(${fieldName},
              case when f = 'card_token' then to_jsonb('changed'::text)
                else jsonb_build_object('old', ${oldValue}, 'new', ${newValue}) end)
            from unnest(e.changed_fields) f) end,
        -- A card gone from its subscriber's answer says so; moved and not_found say why else.
        'reason', case when e.change = 'removed' then coalesce(e.reason, 'not_listed') else e.reason end,
        'syncRunId', e.sync_run_id
      ) || case when e.change = 'conflict'
        then jsonb_build_object('holderSubscriberId', e.previous -> 'subscriber_id') else '{}' end,
      -- The trace context of the sync that caused it: its subscriber's, or for a card that moved,
      -- the taker's (who holds the card now). Null while tracing is off (no contexts given).
      case when $3::text[] is not null then ($3::text[])[array_position($1::bigint[],
        case when e.reason = 'moved' then c.subscriber_id else e.subscriber_id end)] end
    from mine e join saved_cards c on c.id = e.card_id
    order by e.ord
    returning type
), counted as (
  select type, count(*)::int as n from inserted group by type
)
-- How many of each type (for cards_sync_change_events_total, counted once the commit is known).
select coalesce((select jsonb_object_agg(type, n) from counted), '{}') as types,
  case when exists (select 1 from counted) then pg_notify('${CHANGES_CHANNEL}', '') end`;
