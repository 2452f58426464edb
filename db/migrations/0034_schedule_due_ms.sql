-- subscriber_schedule.due_at in whole milliseconds (values are rounded once, here). The nightly
-- sweep pages through the schedule by (due_at, subscriber_id) and keeps its place as a JavaScript
-- Date, whose milliseconds cannot hold a due time written by `now()` to the microsecond: every row
-- of one enqueue compared as after the cursor again, and a sweep that did not catch those rows up
-- read the same page for ever. Every writer (a sync's trigger, a claim, an enqueue, an older
-- release during a rolling upgrade) is rounded by the column itself.
ALTER TABLE "subscriber_schedule" ALTER COLUMN "due_at" SET DATA TYPE timestamp (3) with time zone;
