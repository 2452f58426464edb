import type { Command } from 'commander';
import type { CliDeps } from './common.js';

// The flags of `pause` and `resume`; their work is in pause.ts, loaded when one runs.

/** Adds `pause` and `resume` to the program. */
export function registerPauseCommands(program: Command, { io, state, configWithoutRefresh }: CliDeps): void {
  program
    .command('pause')
    .description('pause processing on every worker (in-flight jobs finish)')
    .option('--reason <text>', 'why, shown by status')
    .action(async (opts: { reason?: string }) => {
      const { cmdPause } = await import('./pause.js');
      state.exitCode = await cmdPause(
        configWithoutRefresh(),
        io,
        opts.reason !== undefined ? { reason: opts.reason } : {},
      );
    });

  program
    .command('resume')
    .description('resume processing')
    .action(async () => {
      const { cmdResume } = await import('./pause.js');
      state.exitCode = await cmdResume(configWithoutRefresh(), io);
    });
}
