// Webhook delivery, the loop every worker runs when change events are on (docs/webhooks.md): it
// takes each endpoint's new events into deliveries, sends those due, and backs off a receiver
// that fails. What a delivery is, how it is signed and sent, is src/webhooks/'s.

export { startWebhookDelivery, type WebhookDelivery } from './delivery-worker.js';
