import { type Command, InvalidArgumentError } from 'commander';
import {
  parseChangeKinds,
  parseChanges,
  parseCreatedDates,
  parseFaults,
  parseWakeUp,
  parseWalletCards,
} from '../mock-api/parse.js';
import { intArg, parsedBy } from './args.js';
import type { CliDeps } from './common.js';
import type { MockApiCliOptions } from './mock-api.js';

// The `mock-api` command's flags; its work is in mock-api.ts, loaded when it runs.

/** Adds `mock-api` to the program. */
export function registerMockApiCommand(program: Command, { io, state }: CliDeps): void {
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
      "with --changes: random (cards' dates unrelated to change), from-changes (a change that adds a card dates it) or predating (as from-changes, but the cards held at the start are years old)",
      parsedBy(parseCreatedDates),
    )
    .option(
      '--wake-up <spec>',
      'with --changes: share:rate@after, 0.1:12/h@10m (that share of quiet wallets start changing after that)',
      parsedBy(parseWakeUp),
    )
    .option(
      '--change-kinds <spec>',
      'with --changes: what a change does, add:0.5,remove:0.25,replace:0.25 (replace: a card reissued in place, its createDate kept)',
      parsedBy(parseChangeKinds),
    )
    .option(
      '--wallet-cards <range>',
      'with --change-kinds: cards a wallet holds, MIN-MAX (default 1-4)',
      parsedBy(parseWalletCards),
    )
    .action(async (opts: MockApiCliOptions) => {
      const { cmdMockApi } = await import('./mock-api.js');
      state.exitCode = await cmdMockApi(io, opts);
    });
}
