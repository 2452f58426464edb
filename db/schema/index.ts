// Table and column names are public (docs/analytics.md): analysts and their scripts query them. The tables
// and the reporting views live in db/schema/, one file per part of the product; this module is their
// one import, and drizzle-kit's (drizzle.config.ts).

export * from './audit.js';
export * from './cards.js';
export * from './event-types.js';
export * from './events.js';
export * from './fleet.js';
export * from './ledger.js';
export * from './refresh.js';
export * from './subscribers.js';
export * from './views.js';
export * from './webhooks.js';
