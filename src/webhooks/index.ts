// Webhooks (docs/webhooks.md): the delivery loop a worker runs, endpoints' secrets, the fan-out and
// replays, the parameters the commands and the admin routes take, and what `status` shows.

export type { RetrySchedule } from './backoff.js';
export { type DeliveryReport, listDeliveries } from './deliveries-report.js';
export { startWebhookDelivery, type WebhookDelivery } from './delivery-worker.js';
export { insertEndpoint, resealEndpointSecrets, rotateEndpointSecret } from './endpoint-secrets.js';
export { feedCursorAt, feedHead } from './fanout.js';
export {
  parseEndpointId,
  parseSince,
  type Since,
  shownUrl,
} from './params.js';
export { replayEndpoint } from './replay.js';
export { signature } from './signing.js';
export { assertPublicUrl, WebhookAddressError } from './ssrf.js';
export {
  DEFAULT_RETENTION_DAYS,
  formatWebhooks,
  nearRetention,
  nearRetentionText,
  pendingText,
  readWebhooksStatus,
  urlWithoutQuery,
  type WebhookStatus,
  waitingText,
} from './status.js';
