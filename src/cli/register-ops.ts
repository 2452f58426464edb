import type { Command } from 'commander';
import { intArg } from './args.js';
import type { CliDeps } from './common.js';

// The flags of the commands an operator runs to look at and steer the running fleet: `refresh`,
// `serve`, `doctor`, `status`, `pause` and `resume`. Each one's work is in its own file
// (refresh.ts, serve.ts, doctor.ts, status.ts, pause.ts), loaded only when it runs, so that
// `--help` loads none of it (docs/architecture.md, "Light fronts").

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

/** Adds `serve` to the program. */
export function registerServeCommand(program: Command, { io, state, configWithoutRefresh }: CliDeps): void {
  program
    .command('serve')
    .description('run the admin HTTP server (health, metrics, dashboard, resync API)')
    .option('--host <host>', 'address to bind (default ADMIN_HOST)')
    .option('--port <port>', 'port (default ADMIN_PORT)', intArg('--port', 0, 65_535))
    .action(async (opts: { host?: string; port?: number }) => {
      const { cmdServe } = await import('./serve.js');
      state.exitCode = await cmdServe(configWithoutRefresh(), io, opts);
    });
}

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
