import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { rootCause } from '../db/errors.js';
import type { Target } from './api/lookup.js';
import { intArg, parsedBy } from './commands/args.js';
import type { Io } from './commands/common.js';
import { parseColumn } from './commands/enqueue-lines.js';
import type { MockApiCliOptions } from './commands/mock-api.js';
import { registerChangesCommand } from './commands/register-changes.js';
import { registerTokenCommands } from './commands/register-tokens.js';
import { registerWebhookCommands } from './commands/register-webhooks.js';
import { loadConfig } from './config/index.js';
import { CliError, ConfigError } from './errors.js';
import { parseChanges, parseWakeUp } from './mock-api/changes.js';
import { parseCreatedDates } from './mock-api/created-dates.js';
import { parseFaults } from './mock-api/server.js';
import { parseEmail, parseSubscriberId } from './targets.js';
import { durationHint, durationMs } from './time.js';
import { packageVersion } from './version.js';

/** The `cards-sync` program. Each action sets `exitCode`; nothing runs at import time. */
export function buildProgram(io: Io, state: { exitCode: number }): Command {
  const program = new Command('cards-sync')
    .description('Keeps a Postgres copy of every subscriber’s saved cards from the Saved Cards Lookup API')
    .version(packageVersion(), '--version', 'print the version')
    .showHelpAfterError('(run cards-sync --help for usage)')
    .configureOutput({ writeOut: (s) => io.out(s.trimEnd()), writeErr: (s) => io.err(s.trimEnd()) })
    .exitOverride();
  // A command that does not run the refresh warns about a bad REFRESH_* setting and goes on.
  const configWithoutRefresh = () => loadConfig(io.env, { refreshUnused: { warn: io.err } });

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
      const { cmdMigrate } = await import('./commands/sync.js');
      state.exitCode = await cmdMigrate(configWithoutRefresh(), io, {
        waitMs: opts.wait ?? 0,
        force: !!opts.force,
      });
    });

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
        const { cmdDryRun } = await import('./commands/dry-run.js');
        state.exitCode = await cmdDryRun(configWithoutRefresh(), io, target, { json: opts.json ?? false });
        return;
      }
      const { cmdSync } = await import('./commands/sync.js');
      state.exitCode = await cmdSync(configWithoutRefresh(), io, target, { json: opts.json ?? false });
    });

  program
    .command('mock-api')
    .description('run a local sandbox of the Saved Cards API with deterministic data')
    .option('--port <port>', 'port to listen on', intArg('--port', 0, 65_535), 4010)
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option('--api-key <key>', 'accepted API key (default: CARDS_API_KEY, else any key)')
    .option('--latency-ms <ms>', 'delay before each answer', intArg('--latency-ms', 0, 600_000), 0)
    .option(
      '--fail-rate <ratio>',
      'share of requests answered 503 (0 to 1)',
      (v: string) => {
        const n = Number(v);
        if (!/^\d*\.?\d+$/.test(v) || n > 1)
          throw new InvalidArgumentError('--fail-rate must be a number from 0 to 1');
        return n;
      },
      0,
    )
    .option(
      '--not-found-every <n>',
      'ids divisible by n answer 404 (0 = never)',
      intArg('--not-found-every', 0, 1e9),
      0,
    )
    .option(
      '--cards-per-subscriber <n>',
      'cards per subscriber (default 1 to 4)',
      intArg('--cards-per-subscriber', 0, 100_000),
    )
    .option(
      '--generation <n>',
      'a different generation changes tokens and bank names',
      intArg('--generation', 0, 1e6),
      0,
    )
    .option(
      '--faults <spec>',
      'inject faults into shares of the answers: 429=0.01,slow=0.02,truncated=0.02,trickle=0.01',
      parsedBy(parseFaults),
    )
    .option(
      '--changes <spec>',
      'wallets change over time: share:rate pairs, 0.7:0,0.2:1/h,0.08:12/h,0.02:1/m (the rest never change)',
      parsedBy(parseChanges),
    )
    .option(
      '--created-dates <world>',
      "with --changes: random (cards' dates unrelated to change) or from-changes (a change that adds a card dates it)",
      parsedBy(parseCreatedDates),
    )
    .option(
      '--wake-up <spec>',
      'with --changes: share:rate@after, 0.1:12/h@10m (that share of quiet wallets start changing after that)',
      parsedBy(parseWakeUp),
    )
    .action(async (opts: MockApiCliOptions) => {
      const { cmdMockApi } = await import('./commands/mock-api.js');
      state.exitCode = await cmdMockApi(io, opts);
    });

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
        const { cmdWorker } = await import('./commands/worker.js');
        state.exitCode = await cmdWorker(loadConfig(io.env), io, {
          ...(opts.concurrency !== undefined ? { concurrency: opts.concurrency } : {}),
          exitWhenIdle: opts.exitWhenIdle ?? false,
          admin: opts.admin ?? false,
          shutdownTimeoutMs: opts.shutdownTimeout,
        });
      },
    );

  const collect =
    <T>(parse: (raw: string) => T) =>
    (value: string, previous: T[] = []): T[] => [...previous, parsedBy(parse)(value)];
  program
    .command('enqueue')
    .description('put sync jobs on the queue')
    .option('--id <id...>', 'subscriber ids (repeatable)', collect(parseSubscriberId))
    .option('--email <email...>', 'subscriber e-mails (repeatable)', collect(parseEmail))
    .option('--file <path>', 'one id or e-mail per line; - reads standard input')
    .option('--strict', 'refuse the whole file, enqueueing nothing, if one line is bad')
    .option(
      '--column <n>',
      'read column N (from 1) of each comma-separated line of --file, e.g. a CSV export',
      parsedBy(parseColumn),
    )
    .action(
      async (opts: { id?: number[]; email?: string[]; file?: string; strict?: boolean; column?: number }) => {
        const { cmdEnqueue } = await import('./commands/enqueue.js');
        state.exitCode = await cmdEnqueue(
          configWithoutRefresh(),
          io,
          {
            ids: opts.id ?? [],
            emails: opts.email ?? [],
            ...(opts.file !== undefined ? { file: opts.file } : {}),
            strict: opts.strict ?? false,
            ...(opts.column !== undefined ? { column: opts.column } : {}),
          },
          { stdin: io.stdin ?? process.stdin, isTTY: io.isTTY ?? false },
        );
      },
    );

  program
    .command('refresh')
    .description('start a refresh of every known subscriber now')
    .option('--stale <duration>', 'only subscribers not synced successfully within this long (36h, 7d)')
    .action(async (opts: { stale?: string }) => {
      const { cmdRefresh } = await import('./commands/refresh.js');
      state.exitCode = await cmdRefresh(
        loadConfig(io.env),
        io,
        opts.stale !== undefined ? { stale: opts.stale } : {},
      );
    });

  program
    .command('serve')
    .description('run the admin HTTP server (health, metrics, dashboard, resync API)')
    .option('--host <host>', 'address to bind (default ADMIN_HOST)')
    .option('--port <port>', 'port (default ADMIN_PORT)', intArg('--port', 0, 65_535))
    .action(async (opts: { host?: string; port?: number }) => {
      const { cmdServe } = await import('./commands/serve.js');
      state.exitCode = await cmdServe(configWithoutRefresh(), io, opts);
    });

  program
    .command('doctor')
    .description('check configuration, Postgres, migrations, the clock, Redis and the API key')
    .action(async () => {
      const { cmdDoctor } = await import('./commands/doctor.js');
      state.exitCode = await cmdDoctor(loadConfig(io.env), io);
    });

  program
    .command('status')
    .description('queue counts, paused or not, failures and data freshness')
    .option('--json', 'print one JSON object')
    .action(async (opts: { json?: boolean }) => {
      const { cmdStatus } = await import('./commands/status.js');
      state.exitCode = await cmdStatus(configWithoutRefresh(), io, { json: opts.json ?? false });
    });

  program
    .command('pause')
    .description('pause processing on every worker (in-flight jobs finish)')
    .option('--reason <text>', 'why, shown by status')
    .action(async (opts: { reason?: string }) => {
      const { cmdPause } = await import('./commands/pause.js');
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
      const { cmdResume } = await import('./commands/pause.js');
      state.exitCode = await cmdResume(configWithoutRefresh(), io);
    });

  registerTokenCommands(program, io, state);
  registerChangesCommand(program, io, state);
  registerWebhookCommands(program, io, state);

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
    io.err(`cards-sync: unexpected failure: ${rootCause(error).message}`);
    return 1;
  }
}
