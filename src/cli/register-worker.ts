import type { Command } from 'commander';
import { intArg } from './args.js';
import type { CliDeps } from './common.js';

// The `worker` command's flags; its work is in worker.ts, loaded when it runs.

/** Adds `worker` to the program. */
export function registerWorkerCommand(program: Command, { io, state, config }: CliDeps): void {
  program
    .command('worker')
    .description('process sync jobs from the queue')
    .option(
      '--concurrency <n>',
      'jobs in flight in this process (default SYNC_CONCURRENCY)',
      intArg('--concurrency', 1, 1000),
    )
    .option('--exit-when-idle', 'exit 0 once nothing is waiting, delayed or active')
    .option('--admin', 'also run the admin server in this process (what npm start does)')
    .option(
      '--shutdown-timeout <ms>',
      'how long SIGTERM waits for in-flight jobs',
      intArg('--shutdown-timeout', 0, 3_600_000),
      30_000,
    )
    .action(
      async (opts: {
        concurrency?: number;
        exitWhenIdle?: boolean;
        admin?: boolean;
        shutdownTimeout: number;
      }) => {
        const { cmdWorker } = await import('./worker.js');
        state.exitCode = await cmdWorker(config(), io, {
          ...(opts.concurrency !== undefined ? { concurrency: opts.concurrency } : {}),
          exitWhenIdle: opts.exitWhenIdle ?? false,
          admin: opts.admin ?? false,
          shutdownTimeoutMs: opts.shutdownTimeout,
        });
      },
    );
}
