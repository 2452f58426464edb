// Webhooks (docs/webhooks.md): a delivery's attempt (signed, sent, its backoff), endpoints'
// secrets, the fan-out and replays, the parameters the commands and the admin routes take, and
// what `status` shows. The loop a worker runs over them is jobs/webhooks/.

export { DEFAULT_SCHEDULE, type RetrySchedule } from './backoff.js';
export { createWebhookSender, type WebhookSender } from './deliver-http.js';
export { type DeliveryReport, listDeliveries } from './deliveries-report.js';
export { attemptSender, type Target } from './delivery-attempt.js';
export {
  endpointTarget,
  insertEndpoint,
  resealEndpointSecrets,
  rotateEndpointSecret,
} from './endpoint-secrets.js';
export { FANOUT_PAGE, feedCursorAt, feedHead, takeEvents } from './fanout.js';
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
