// Change events (docs/events.md): the pull feed and its cursor, long polls and their wake-ups,
// whether events are written, and the partitions' upkeep.

export { type ChangeSignal, createChangeSignal } from '../../db/events/index.js';
export { FEED_START, parseCursor } from './cursor.js';
export {
  type ChangeEvent,
  CursorAheadError,
  checkCursor,
  type FeedEntry,
  feedHeldBack,
  MAX_LIMIT,
  readFeed,
  readFeedEntries,
} from './feed.js';
export { changeEventsInEffect, TURN_EVENTS_ON } from './in-effect.js';
export { pollFeed } from './long-poll.js';
export { FeedParamError, parseFeedParams } from './params.js';
