import type { Command } from 'commander';
import { intArg } from './args.js';
import type { CliDeps } from './common.js';

// The `serve` command's flags; its work is in serve.ts, loaded when it runs.

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
