// The webhooks commands' flag parsers, loading neither the database nor a delivery's client
// (docs/architecture.md, "Light fronts").

export {
  parseDescription,
  parseEndpointId,
  parseEndpointUrl,
  parseEventTypes,
  parseSince,
  type Since,
} from './params.js';
