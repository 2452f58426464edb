// The Saved Cards Lookup API's client: one lookup, every way it can end, and the card record as
// the API answers it (docs/architecture.md).

export { type ApiClient, createApiClient, parseRetryAfter } from './client.js';
export type { FetchOutcome, Target } from './lookup.js';
export type { SavedCard } from './schema.js';
