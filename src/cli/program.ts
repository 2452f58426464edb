import { Command, CommanderError } from 'commander';
import { rootCause } from '../../db/errors.js';
import { CliError, ConfigError, packageVersion } from '../shared/index.js';
import type { CliDeps, Io } from './common.js';
import { describeDbError } from './db-problem.js';
import { registerChangesCommand } from './register-changes.js';
import { registerEnqueueCommand } from './register-enqueue.js';
import { registerMockApiCommand } from './register-mock-api.js';
import {
  registerDoctorCommand,
  registerPauseCommands,
  registerRefreshCommand,
  registerServeCommand,
  registerStatusCommand,
} from './register-ops.js';
import { registerMigrateCommand, registerSyncCommand } from './register-sync.js';
import { registerTokenCommands } from './register-tokens.js';
import { registerWebhookCommands } from './register-webhooks.js';
import { registerWorkerCommand } from './register-worker.js';
/**
 * The `cards-sync` program. Each command's flags are added by its `registerX` in
 * src/cli/register-*.ts, in the order `--help` lists them; each action sets `exitCode`;
 * nothing runs at import time.
 */
export function buildProgram(io: Io, state: { exitCode: number }): Command {
  const program = new Command('cards-sync')
    .description('Keeps a Postgres copy of every subscriber’s saved cards from the Saved Cards Lookup API')
    .version(packageVersion(), '--version', 'print the version')
    .showHelpAfterError('(run cards-sync --help for usage)')
    .configureOutput({ writeOut: (s) => io.out(s.trimEnd()), writeErr: (s) => io.err(s.trimEnd()) })
    .exitOverride();
  // The configuration's module (and zod under it) is loaded before a command's action, not for
  // `--help` or a refused flag: a program that prints its help loads what it prints, no more.
  let config: typeof import('../config/index.js') | undefined;
  program.hook('preAction', async () => {
    config ??= await import('../config/index.js');
  });
  const loaded = () => {
    if (!config) throw new Error('the configuration is read before an action, not while the flags are');
    return config;
  };
  const deps: CliDeps = {
    io,
    state,
    config: () => loaded().loadConfig(io.env),
    // A command that does not run the refresh warns about a bad REFRESH_* setting and goes on.
    configWithoutRefresh: () => loaded().loadConfig(io.env, { refreshUnused: { warn: io.err } }),
  };

  registerMigrateCommand(program, deps);
  registerSyncCommand(program, deps);
  registerMockApiCommand(program, deps);
  registerWorkerCommand(program, deps);
  registerEnqueueCommand(program, deps);
  registerRefreshCommand(program, deps);
  registerServeCommand(program, deps);
  registerDoctorCommand(program, deps);
  registerStatusCommand(program, deps);
  registerPauseCommands(program, deps);
  registerTokenCommands(program, deps);
  registerChangesCommand(program, deps);
  registerWebhookCommands(program, deps);

  // A mistake in a command's options points at that command's help, not the program's.
  for (const command of program.commands) {
    command.showHelpAfterError(`(run cards-sync ${command.name()} --help for usage)`);
  }
  return program;
}

/** Runs the CLI; returns the exit code (0 success, 1 runtime failure, 2 usage or configuration). */
export async function run(argv: string[], io: Io): Promise<number> {
  const state = { exitCode: 0 };
  const program = buildProgram(io, state);
  try {
    await program.parseAsync(argv, { from: 'user' });
    return state.exitCode;
  } catch (error) {
    if (error instanceof CommanderError) {
      // help and version are not errors
      return error.exitCode === 0 ? 0 : 2;
    }
    if (error instanceof ConfigError) {
      io.err(`cards-sync: ${error.message}`);
      return 2;
    }
    if (error instanceof CliError) {
      io.err(`cards-sync: ${error.message}`);
      return error.exitCode;
    }
    // Postgres not there or not migrated, met where no command said so itself (the worker's
    // start-up checks, say): the same line with the fix that status and enqueue give.
    const { DEFAULT_DATABASE_URL } = await import('../config/index.js');
    const db = describeDbError(error, io.env.DATABASE_URL?.trim() || DEFAULT_DATABASE_URL);
    if (db !== undefined) {
      io.err(`cards-sync: ${db}`);
      return 1;
    }
    io.err(`cards-sync: unexpected failure: ${rootCause(error).message}`);
    return 1;
  }
}
