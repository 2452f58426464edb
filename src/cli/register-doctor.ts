import type { Command } from 'commander';
import type { CliDeps } from './common.js';

// The `doctor` command; its work is in doctor.ts, loaded when it runs.

/** Adds `doctor` to the program. */
export function registerDoctorCommand(program: Command, { io, state, config }: CliDeps): void {
  program
    .command('doctor')
    .description('check configuration, Postgres, migrations, the clock, Redis and the API key')
    .action(async () => {
      const { cmdDoctor } = await import('./doctor.js');
      state.exitCode = await cmdDoctor(config(), io);
    });
}
