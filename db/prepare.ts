import type pg from 'pg';
import { prepareLedgerConversion, undoLedgerPreparation } from './ledger/convert.js';

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
      await client.query(
        `create unique index concurrently if not exists subscribers_email_lower_next_idx
         on subscribers (lower(email)) where email is not null`,
      );
    },
  },
};

/** Runs the preparations of the pending migrations; returns what undoes them if the migration fails. */
export async function prepareMigrations(
  client: pg.ClientBase,
  pending: readonly string[],
): Promise<() => Promise<void>> {
  const steps = pending.flatMap((tag) => (PREPARATIONS[tag] ? [PREPARATIONS[tag]] : []));
  for (const step of steps) await step.run(client);
  return async () => {
    for (const step of steps) await step.undo?.(client).catch(() => undefined);
  };
}
