// Change events' statements (docs/events.md): the outbox written in a sync's transaction, the
// pull feed's pages, the notifications long polls wait on, and the daily partitions.

export { countEventsAfter, cursorAhead, feedHeadRow, feedHeldBackAfter, readFeedRows } from './feed.js';
export {
  type EventCounts,
  eventsCommitted,
  onEventsCommitted,
  writeChangeEvents,
  writeChangeEventsIn,
} from './outbox.js';
export { addEventPartitions, dropExpiredEvents, eventsTableExists } from './partitions.js';
export { type ChangeSignal, createChangeSignal } from './signal.js';
