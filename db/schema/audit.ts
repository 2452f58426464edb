import { sql } from 'drizzle-orm';
import { bigint, check, index, jsonb, pgTable, text } from 'drizzle-orm/pg-core';
import { inList, tz } from './columns.js';

// The audit trail: who did what, from the CLI or HTTP.

export const ADMIN_SOURCES = ['cli', 'http'] as const;
export type AdminSource = (typeof ADMIN_SOURCES)[number];

/** Who did what: one row per operator action, from the CLI or HTTP. Never a secret in `detail`. */
export const adminActions = pgTable(
  'admin_actions',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    at: tz('at').notNull().defaultNow(),
    /** The token's name over HTTP (`operator`, `reader`); the OS user on the CLI. */
    actor: text('actor').notNull(),
    source: text('source').$type<AdminSource>().notNull(),
    action: text('action').notNull(),
    detail: jsonb('detail').$type<Record<string, unknown>>().notNull().default({}),
  },
  (t) => [
    check('admin_actions_source_valid', sql`${t.source} in (${inList(ADMIN_SOURCES)})`),
    index('admin_actions_at_idx').on(t.at),
  ],
);
