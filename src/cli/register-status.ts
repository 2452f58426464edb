import type { Command } from 'commander';
import type { CliDeps } from './common.js';

// The `status` command's flags; its work is in status.ts, loaded when it runs.

/** Adds `status` to the program. */
export function registerStatusCommand(program: Command, { io, state, configWithoutRefresh }: CliDeps): void {
  program
    .command('status')
    .description('queue counts, paused or not, failures and data freshness')
    .option('--json', 'print one JSON object')
    .action(async (opts: { json?: boolean }) => {
      const { cmdStatus } = await import('./status.js');
      state.exitCode = await cmdStatus(configWithoutRefresh(), io, { json: opts.json ?? false });
    });
}
