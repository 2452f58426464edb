import type pg from 'pg';
import { prepareLedgerConversion, undoLedgerPreparation } from './ledger/index.js';

// Work a migration would otherwise do under its locks, done before its transaction while writers
// go on: scans that validate, indexes built CONCURRENTLY. Each step is idempotent, and the
// migration it prepares does its work itself when the step did not run (drizzle-kit migrate).

interface Preparation {
  run(client: pg.ClientBase): Promise<unknown>;
  /** Undoes what must not outlive a migration that failed. */
  undo?(client: pg.ClientBase): Promise<unknown>;
}

const PREPARATIONS: Record<string, Preparation> = {
  '0019_ledger_partitions': { run: prepareLedgerConversion, undo: undoLedgerPreparation },
  '0022_partial_email_index': {
    run: async (client) => {
      // On a new database the table comes with the migrations themselves.
      const { rows } = await client.query(`select to_regclass('public.subscribers') is not null as ok`);
      if (!rows[0]?.ok) return;
      // A build that did not finish leaves an invalid index: start again rather than swap it in.
      const { rows: invalid } = await client.query(
        `select 1 from pg_index where indexrelid = to_regclass('public.subscribers_email_lower_next_idx') and not indisvalid`,
      );
      if (invalid.length > 0) await client.query('drop index concurrently subscribers_email_lower_next_idx');
      await client.query(
        `create unique index concurrently if not exists subscribers_email_lower_next_idx
         on subscribers (lower(email)) where email is not null`,
      );
    },
  },
};

/**
 * Runs the preparations of the pending migrations, then `migrate` (the migrations themselves). If a
 * preparation or the migration fails, what must not outlive it is undone, whichever step failed.
 */
export async function preparedMigration(
  client: pg.ClientBase,
  pending: readonly string[],
  migrate: () => Promise<unknown>,
): Promise<void> {
  const steps = pending.flatMap((tag) => (PREPARATIONS[tag] ? [PREPARATIONS[tag]] : []));
  try {
    for (const step of steps) await step.run(client);
    await migrate();
  } catch (error) {
    for (const step of steps) await step.undo?.(client).catch(() => undefined);
    throw error;
  }
}
