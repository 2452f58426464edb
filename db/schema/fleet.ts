import { sql } from 'drizzle-orm';
import { index, integer, jsonb, pgTable, text } from 'drizzle-orm/pg-core';
import { tz } from './columns.js';

// The fleet registry's tables: the live processes, and the breaking migrations they must know.

/**
 * The fleet: one row per long-running process (worker, admin server), with a heartbeat. A row
 * whose beat is older than the registry's timeout is a process gone without saying so.
 */
export const fleetProcesses = pgTable(
  'fleet_processes',
  {
    id: text('id').primaryKey(),
    role: text('role').notNull(),
    host: text('host').notNull(),
    pid: integer('pid').notNull(),
    version: text('version').notNull(),
    /** The newest migration this process's release ships (its journal's last tag). */
    knownMigration: text('known_migration').notNull(),
    /** Ids of the keys in its card-token ring (never the keys). */
    keyIds: text('key_ids').array().notNull().default(sql`'{}'::text[]`),
    concurrency: integer('concurrency'),
    /** The settings every process must share (rate limit, refresh mode and budget, queue prefix). */
    settings: jsonb('settings').$type<Record<string, unknown>>().notNull().default({}),
    startedAt: tz('started_at').notNull().defaultNow(),
    lastBeatAt: tz('last_beat_at').notNull().defaultNow(),
  },
  (t) => [index('fleet_processes_last_beat_idx').on(t.lastBeatAt)],
);

/**
 * The breaking migrations applied to this database (db/migrations/breaking.json): a worker whose
 * release does not know the newest of them refuses to start, and a running one leaves (exit 3).
 */
export const breakingMigrations = pgTable('breaking_migrations', {
  tag: text('tag').primaryKey(),
  appliedAt: tz('applied_at').notNull().defaultNow(),
  /** The version of the release whose `migrate` applied it: the writer fence names it (db/fence.ts). */
  release: text('release'),
});
