import { type Command, InvalidArgumentError } from 'commander';
import type { CliDeps } from './common.js';

// The token commands' flags; their work is in tokens.ts, loaded when one runs.

const whole = (name: string, min: number) => (value: string) => {
  if (!/^\d+$/.test(value) || Number(value) < min || !Number.isSafeInteger(Number(value))) {
    throw new InvalidArgumentError(`${name} must be a whole number of at least ${min}`);
  }
  return Number(value);
};

/** Adds `token` and `tokens rotate` to the program. */
export function registerTokenCommands(program: Command, { io, state, configWithoutRefresh }: CliDeps): void {
  program
    .command('token')
    .description('print one decrypted card token on stdout, for a consumer that must charge the card')
    .requiredOption('--card-id <id>', 'the card (saved_cards.id)', whole('--card-id', 1))
    .option('--force', 'print even to a terminal')
    .action(async (opts: { cardId: number; force?: boolean }) => {
      const { cmdToken } = await import('./tokens.js');
      state.exitCode = await cmdToken(configWithoutRefresh(), io, {
        cardId: opts.cardId,
        force: opts.force ?? false,
      });
    });

  const tokens = program.command('tokens').description('card tokens at rest');
  tokens
    .command('rotate')
    .description('re-seal every stored card token under the first key of CARD_TOKEN_KEYS (plain ones too)')
    .option('--batch-size <n>', 'rows per transaction', whole('--batch-size', 1), 500)
    .option(
      '--pause-ms <ms>',
      'rest between batches, to go easy on a busy database',
      whole('--pause-ms', 0),
      0,
    )
    .action(async (opts: { batchSize: number; pauseMs: number }) => {
      const { cmdTokensRotate } = await import('./tokens.js');
      state.exitCode = await cmdTokensRotate(configWithoutRefresh(), io, opts);
    });
}
