import { sql } from 'drizzle-orm';
import { timestamp } from 'drizzle-orm/pg-core';

// Column helpers shared by the tables of db/schema/.

/** A `timestamptz` column, read as a Date. */
export const tz = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

/** A constant SQL list of strings, for CHECK constraints. */
export const inList = (values: readonly string[]) => sql.raw(values.map((v) => `'${v}'`).join(', '));
