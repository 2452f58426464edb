import { sql } from 'drizzle-orm';
import {
  bigint,
  boolean,
  check,
  foreignKey,
  index,
  integer,
  pgTable,
  smallint,
  text,
} from 'drizzle-orm/pg-core';
import { inList, tz } from './columns.js';

// Webhook endpoints and what was delivered to them (docs/webhooks.md). Delivery reads the
// change feed only (src/events/feed.ts): each endpoint keeps its place in it (`feed_cursor`), and
// every event it takes becomes one delivery row, retried until a 2xx or the dead letter.

export const DELIVERY_STATUSES = ['pending', 'delivered', 'dead'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];
export const ATTEMPT_OUTCOMES = ['delivered', 'failed'] as const;
export type AttemptOutcome = (typeof ATTEMPT_OUTCOMES)[number];

/** One receiver of events. Its signing secrets are sealed under the card-token key ring. */
export const webhookEndpoints = pgTable(
  'webhook_endpoints',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    url: text('url').notNull(),
    description: text('description').notNull().default(''),
    /** The event types it takes; null = every type. */
    eventTypes: text('event_types').array(),
    enabled: boolean('enabled').notNull().default(true),
    /** Why it was disabled (by an operator, or after failing for days); null while enabled. */
    disabledReason: text('disabled_reason'),
    disabledAt: tz('disabled_at'),
    /** The signing secret (`whsec_…`), sealed (`ct1:…`, src/tokens/keyring.ts). */
    secret: text('secret').notNull(),
    /** The secret before the last rotation, sealed; it signs too until `previous_secret_expires_at`. */
    previousSecret: text('previous_secret'),
    previousSecretExpiresAt: tz('previous_secret_expires_at'),
    /** Its place in the change feed: every event up to here has a delivery row. */
    feedCursor: text('feed_cursor').notNull(),
    /** Since when no attempt has succeeded (null while it answers 2xx). */
    failingSince: tz('failing_since'),
    createdAt: tz('created_at').notNull().defaultNow(),
    /**
     * When `webhooks remove` took it away (migration 0030); null while it exists. A removed endpoint
     * is disabled, its secrets are erased, and it is in no list; its deliveries stay readable until
     * the retention drops them, then it goes too.
     */
    removedAt: tz('removed_at'),
  },
  (t) => [
    check('webhook_endpoints_url_http', sql`${t.url} ~ '^https?://'`),
    // Free text shown in lists and pages: no control characters (a line break would forge lines).
    check(
      'webhook_endpoints_description_text',
      sql`length(${t.description}) <= 200 and ${t.description} !~ '[[:cntrl:]]'`,
    ),
  ],
);

/**
 * One event for one endpoint. `id` is taken in feed order as the endpoint takes events, so within
 * an endpoint and a subscriber a smaller id is an earlier commit: a delivery is sent only when
 * no earlier one of its (endpoint, subscriber) is still pending.
 */
export const webhookDeliveries = pgTable(
  'webhook_deliveries',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    endpointId: bigint('endpoint_id', { mode: 'number' }).notNull(),
    /** `evt_…`: the `webhook-id` of every attempt, a replay's included. */
    eventId: text('event_id').notNull(),
    subscriberId: bigint('subscriber_id', { mode: 'number' }).notNull(),
    type: text('type').notNull(),
    /** When the event was written: the lag is measured from here. */
    eventAt: tz('event_at').notNull(),
    /** The exact JSON body sent (every attempt signs the same bytes). */
    body: text('body').notNull(),
    status: text('status').$type<DeliveryStatus>().notNull().default('pending'),
    attempts: smallint('attempts').notNull().default(0),
    nextAttemptAt: tz('next_attempt_at').notNull().defaultNow(),
    firstAttemptAt: tz('first_attempt_at'),
    /** The worker holding it while an attempt is in flight, and until when (a crash frees it then). */
    lockedBy: text('locked_by'),
    lockedUntil: tz('locked_until'),
    finishedAt: tz('finished_at'),
    /** Made by `webhooks replay` rather than by the feed. */
    replay: boolean('replay').notNull().default(false),
    createdAt: tz('created_at').notNull().defaultNow(),
    /**
     * The event's `change_events.tracingspancontext`, copied by the fan-out: each attempt's span
     * links to the sync that wrote the event. Null when tracing was off for that sync.
     */
    tracingspancontext: text('tracingspancontext'),
  },
  (t) => [
    foreignKey({ columns: [t.endpointId], foreignColumns: [webhookEndpoints.id] }).onDelete('cascade'),
    check('webhook_deliveries_status_valid', sql`${t.status} in (${inList(DELIVERY_STATUSES)})`),
    // What is due, per endpoint; and what comes before a delivery in its (endpoint, subscriber).
    index('webhook_deliveries_due_idx').on(t.endpointId, t.nextAttemptAt).where(sql`${t.status} = 'pending'`),
    index('webhook_deliveries_order_idx')
      .on(t.endpointId, t.subscriberId, t.id)
      .where(sql`${t.status} = 'pending'`),
    index('webhook_deliveries_endpoint_idx').on(t.endpointId, t.id),
  ],
);

/** One POST: what came back and how long it took. Never a secret; the excerpt is redacted. */
export const webhookAttempts = pgTable(
  'webhook_attempts',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    deliveryId: bigint('delivery_id', { mode: 'number' }).notNull(),
    endpointId: bigint('endpoint_id', { mode: 'number' }).notNull(),
    attempt: smallint('attempt').notNull(),
    at: tz('at').notNull().defaultNow(),
    outcome: text('outcome').$type<AttemptOutcome>().notNull(),
    /** The HTTP status; null when none came (timeout, refused, address refused). */
    statusCode: smallint('status_code'),
    /** `timeout`, `connect`, `address_refused`, `redirect`, `http_status`; null when delivered. */
    errorCode: text('error_code'),
    latencyMs: integer('latency_ms').notNull(),
    excerpt: text('excerpt').notNull().default(''),
  },
  (t) => [
    foreignKey({ columns: [t.deliveryId], foreignColumns: [webhookDeliveries.id] }).onDelete('cascade'),
    check('webhook_attempts_outcome_valid', sql`${t.outcome} in (${inList(ATTEMPT_OUTCOMES)})`),
    index('webhook_attempts_delivery_idx').on(t.deliveryId),
    index('webhook_attempts_endpoint_idx').on(t.endpointId, t.at),
  ],
);
