import type { Command } from 'commander';
import { parseEmail, parseSubscriberId } from '../sync/parse.js';
import { parsedBy } from './args.js';
import type { CliDeps } from './common.js';
import { parseColumn } from './enqueue-lines.js';

// The `enqueue` command's flags; its work is in enqueue.ts, loaded when it runs.

const collect =
  <T>(parse: (raw: string) => T) =>
  (value: string, previous: T[] = []): T[] => [...previous, parsedBy(parse)(value)];

/** Adds `enqueue` to the program. */
export function registerEnqueueCommand(program: Command, { io, state, configWithoutRefresh }: CliDeps): void {
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
        const { cmdEnqueue } = await import('./enqueue.js');
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
}
