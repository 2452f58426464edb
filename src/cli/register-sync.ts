import { type Command, InvalidArgumentError, Option } from 'commander';
import type { Target } from '../api/index.js';
import { CliError, durationHint, durationMs } from '../shared/index.js';
import { parseEmail, parseSubscriberId } from '../sync/parse.js';
import { parsedBy } from './args.js';
import type { CliDeps } from './common.js';

// The flags of `migrate` and `sync`; their work is in sync.ts and dry-run.ts, loaded when one runs.

/** Adds `migrate` to the program. */
export function registerMigrateCommand(program: Command, { io, state, configWithoutRefresh }: CliDeps): void {
  program
    .command('migrate')
    .description('apply database migrations (creates the database if missing)')
    .option(
      '--wait <duration>',
      'wait this long (90s, 10m) for live processes that do not know a pending breaking migration to leave',
      (raw: string) => {
        const ms = durationMs(raw);
        if (ms === undefined)
          throw new InvalidArgumentError(
            `--wait takes a duration like 90s or 10m, not "${raw}": ${durationHint(raw)}`,
          );
        return ms;
      },
    )
    .option('--force', 'apply a breaking migration even while live processes do not know it (audited)')
    .action(async (opts: { wait?: number; force?: boolean }) => {
      const { cmdMigrate } = await import('./sync.js');
      state.exitCode = await cmdMigrate(configWithoutRefresh(), io, {
        waitMs: opts.wait ?? 0,
        force: !!opts.force,
      });
    });
}

/** Adds `sync` to the program. */
export function registerSyncCommand(program: Command, { io, state, configWithoutRefresh }: CliDeps): void {
  program
    .command('sync')
    .description('sync one subscriber now, in-process, and print the outcome')
    .addOption(
      new Option('--id <id>', 'subscriber id').argParser(parsedBy(parseSubscriberId)).conflicts('email'),
    )
    .addOption(new Option('--email <email>', 'subscriber e-mail').argParser(parsedBy(parseEmail)))
    .option('--json', 'print the outcome as one JSON line')
    .option('--dry-run', 'fetch, validate and print what would change; write nothing')
    .action(async (opts: { id?: number; email?: string; json?: boolean; dryRun?: boolean }) => {
      if (opts.id === undefined && opts.email === undefined) {
        throw new CliError('sync needs --id N or --email E', 2);
      }
      const target: Target = opts.id !== undefined ? { subscriberId: opts.id } : { email: opts.email! };
      if (opts.dryRun) {
        const { cmdDryRun } = await import('./dry-run.js');
        state.exitCode = await cmdDryRun(configWithoutRefresh(), io, target, { json: opts.json ?? false });
        return;
      }
      const { cmdSync } = await import('./sync.js');
      state.exitCode = await cmdSync(configWithoutRefresh(), io, target, { json: opts.json ?? false });
    });
}
