// Table and column names are public (docs/analytics.md): analysts and their scripts query them. The tables
// live in db/schema/, one file per part of the product; this module is their one import.

export * from './schema/audit.js';
export * from './schema/cards.js';
export * from './schema/events.js';
export * from './schema/fleet.js';
export * from './schema/ledger.js';
export * from './schema/refresh.js';
export * from './schema/subscribers.js';
export * from './schema/webhooks.js';
