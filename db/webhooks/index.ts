// Webhooks' statements: endpoints and their sealed secrets, the fan-out's delivery rows, claims
// and attempts of delivery, and what the reports read.

export { latestDeliveryRows, oldestDeadLetterAt } from './deliveries-report.js';
export {
  type AttemptResult,
  AUTO_DISABLED_REASON,
  type ClaimedDelivery,
  claimDeliveries,
  enabledEndpointIds,
  finishAttempt,
  pruneDeliveries,
  pruneRemovedEndpoints,
  releaseDelivery,
  retryWaitingNow,
} from './delivery.js';
export { deleteEndpoint, enabledEndpointCount, endpointRemoval } from './endpoint-lookups.js';
export {
  type EndpointRow,
  endpointLive,
  endpointSecretsRow,
  insertEndpointRow,
  listEndpoints,
  lockEndpointSecrets,
  removeEndpoint,
  rotateSecretRow,
  setEndpointEnabled,
  setEndpointSecret,
  setEndpointSecrets,
} from './endpoints.js';
export {
  insertDeliveryRows,
  lastCursorBefore,
  lastSettledCursor,
  lockEnabledEndpoint,
  lockLiveEndpoint,
  pendingEventIds,
  setFeedCursor,
} from './fanout.js';
