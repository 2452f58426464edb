import type { Command } from 'commander';
import { parseCursor } from '../events/parse.js';
import { parsedBy } from './args.js';
import type { CliDeps } from './common.js';

// The `changes` command's flags; its work is in changes.ts, loaded when it runs.

/** Adds `changes` to the program. */
export function registerChangesCommand(program: Command, { io, state, configWithoutRefresh }: CliDeps): void {
  program
    .command('changes')
    .description('print change events in commit order from a cursor (the start of retention by default)')
    .option(
      '--after <cursor>',
      'print the events after this cursor (a "next" of the feed)',
      parsedBy((raw) => {
        parseCursor(raw);
        return raw;
      }),
    )
    .option('--follow', 'keep waiting for new events (Ctrl-C stops)')
    .option('--json', 'one JSON event per line')
    .action(async (opts: { after?: string; follow?: boolean; json?: boolean }) => {
      const { cmdChanges } = await import('./changes.js');
      state.exitCode = await cmdChanges(configWithoutRefresh(), io, {
        after: opts.after,
        follow: opts.follow ?? false,
        json: opts.json ?? false,
      });
    });
}
