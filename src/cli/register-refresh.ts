import type { Command } from 'commander';
import type { CliDeps } from './common.js';

// The `refresh` command's flags; its work is in refresh.ts, loaded when it runs.

/** Adds `refresh` to the program. */
export function registerRefreshCommand(program: Command, { io, state, config }: CliDeps): void {
  program
    .command('refresh')
    .description('start a refresh of every known subscriber now')
    .option('--stale <duration>', 'only subscribers not synced successfully within this long (36h, 7d)')
    .action(async (opts: { stale?: string }) => {
      const { cmdRefresh } = await import('./refresh.js');
      state.exitCode = await cmdRefresh(config(), io, opts.stale !== undefined ? { stale: opts.stale } : {});
    });
}
