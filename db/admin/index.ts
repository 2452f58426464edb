// The admin server's reads (src/admin/): the overview's figures and freshness, one
// subscriber's page, and the demo's reports over a range of subscribers.

export {
  type FreshnessBuckets,
  freshnessBuckets,
  lastRefreshCompletedAt,
  subscriberDetail,
} from './queries.js';
export { type DataStatus, readDataStatus } from './status.js';
export {
  latestRunId,
  loadSubscriberPage,
  lookupEmail,
  type PageRun,
  type SubscriberPageData,
} from './subscriber-page.js';
export { activeCardsByBank, freshnessByBucket, runsByStatus } from './subscriber-range.js';
