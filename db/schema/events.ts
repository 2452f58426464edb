import { sql } from 'drizzle-orm';
import { bigint, check, customType, index, jsonb, pgTable, text, uuid } from 'drizzle-orm/pg-core';
import { inList, tz } from './columns.js';
import { CHANGE_EVENT_TYPES, type ChangeEventType } from './event-types.js';

// Change events (docs/events.md): the transactional outbox every sync writes into.

/** PostgreSQL's 64-bit transaction id (`pg_current_xact_id()`), read as its decimal text. */
const xid8 = customType<{ data: string; driverData: string }>({ dataType: () => 'xid8' });

/**
 * The outbox: one row per change a sync wrote, inserted in the same transaction as the change and
 * never updated (Debezium's outbox event router reads INSERTs only). `id`, `aggregatetype`,
 * `aggregateid`, `type` and `payload` are the router's default columns. Partitioned by
 * `created_at`, one partition per UTC day (migration 0026, db/events/partitions.ts), which
 * drizzle cannot express: retention (`CHANGE_EVENTS_RETENTION_DAYS`) drops whole days.
 *
 * The pull feed orders events by (`txid`, `seq`) and shows only those of transactions older than
 * every transaction still running (src/events/feed.ts says why that never skips a late commit).
 */
export const changeEvents = pgTable(
  'change_events',
  {
    /** The event id: `evt_` + this uuid is the public id (stable across redeliveries). */
    id: uuid('id').notNull().defaultRandom(),
    /** Taken at insert, in the order the transaction wrote its events. */
    seq: bigint('seq', { mode: 'number' }).notNull().generatedAlwaysAsIdentity(),
    /** The writing transaction (`pg_current_xact_id()`). */
    txid: xid8('txid').notNull().default(sql`pg_current_xact_id()`),
    subscriberId: bigint('subscriber_id', { mode: 'number' }).notNull(),
    /** The sync's clock (the batch's `now`): the partition key. */
    createdAt: tz('created_at').notNull(),
    /** Always `subscriber`: Debezium routes to the topic `outbox.event.subscriber`. */
    aggregatetype: text('aggregatetype').notNull(),
    /** The subscriber id as text: Debezium's message key, so one subscriber stays in one partition. */
    aggregateid: text('aggregateid').notNull(),
    type: text('type').$type<ChangeEventType>().notNull(),
    /** The event's `data` (docs/events.md): never the token, never an e-mail. */
    payload: jsonb('payload').$type<Record<string, unknown>>().notNull(),
    /**
     * The trace context of the sync that wrote the event, while tracing was on and its trace
     * sampled; null otherwise. The W3C `traceparent` (and `tracestate`) as java.util.Properties
     * text (`traceparent=00-…-…-01`): the column and form Debezium's tracing integration reads by
     * default (`tracing.span.context.field`; docs/events.md).
     */
    tracingspancontext: text('tracingspancontext'),
  },
  (t) => [
    check('change_events_type_valid', sql`${t.type} in (${inList(CHANGE_EVENT_TYPES)})`),
    // The feed's order. The only index: each costs every event WAL.
    index('change_events_feed_idx').on(t.txid, t.seq),
  ],
);
