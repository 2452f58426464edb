-- Issue 38: the trace context of the sync that wrote a change event, for the spans of its
-- deliveries to link to (src/events/delivery.ts) and for Debezium's tracing integration, whose
-- default column this is (`tracing.span.context.field`): the W3C `traceparent` (and `tracestate`)
-- as java.util.Properties text (docs/events.md). Null unless the writing sync was traced and
-- sampled: a worker with tracing off, or of an earlier release, writes null.
--
-- Not breaking, and no rewrite: a nullable column without a default is a catalog change. Added to
-- the partitioned parent, it reaches every partition (the default one too), and the partitions
-- change_events_add_partition makes from now on (LIKE change_events) have it. The fan-out copies
-- it into each delivery, so that a claim never has to look the event up.
ALTER TABLE "change_events" ADD COLUMN "tracingspancontext" text;--> statement-breakpoint
ALTER TABLE "webhook_deliveries" ADD COLUMN "tracingspancontext" text;
