import type { Command } from 'commander';
import {
  parseDescription,
  parseEndpointId,
  parseEndpointUrl,
  parseEventTypes,
  parseSince,
  type Since,
} from '../webhooks/parse.js';
import { intArg, parsedBy } from './args.js';
import type { CliDeps } from './common.js';

// The webhook commands' flags (docs/commands.md); their work is in webhooks.ts and webhooks-deliveries.ts.

/** Adds `webhooks add|list|disable|enable|rotate-secret|remove|deliveries|replay` to the program. */
export function registerWebhookCommands(
  program: Command,
  { io, state, configWithoutRefresh: config }: CliDeps,
): void {
  const webhooks = program
    .command('webhooks')
    .description('endpoints that receive change events, signed (Standard Webhooks)');
  const id = parsedBy(parseEndpointId);

  webhooks
    .command('add')
    .description('register an endpoint; prints its id and its signing secret (whsec_…) once')
    .argument('<url>', 'the receiver, http(s)', parsedBy(parseEndpointUrl))
    .option(
      '--types <types>',
      'only these event types, comma-separated (default: all)',
      parsedBy(parseEventTypes),
    )
    .option(
      '--description <text>',
      'what it is, for people (one line, at most 200 characters)',
      parsedBy(parseDescription),
      '',
    )
    .action(async (url: string, opts: { types?: string[]; description: string }) => {
      const { cmdWebhooksAdd } = await import('./webhooks.js');
      state.exitCode = await cmdWebhooksAdd(config(), io, {
        url,
        types: opts.types ?? null,
        description: opts.description,
      });
    });

  webhooks
    .command('list')
    .description('the endpoints, with lag, failures and dead letters')
    .option('--json', 'one JSON array')
    .action(async (opts: { json?: boolean }) => {
      const { cmdWebhooksList } = await import('./webhooks.js');
      state.exitCode = await cmdWebhooksList(config(), io, { json: opts.json ?? false });
    });

  for (const [name, enabled] of [
    ['disable', false],
    ['enable', true],
  ] as const) {
    webhooks
      .command(name)
      .description(
        enabled
          ? 'send to an endpoint again (what waited goes out)'
          : 'stop sending to an endpoint (its events wait)',
      )
      .argument('<id>', 'the endpoint id', id)
      .action(async (endpointId: number) => {
        const { cmdWebhooksEnable } = await import('./webhooks.js');
        state.exitCode = await cmdWebhooksEnable(config(), io, { id: endpointId, enabled });
      });
  }

  webhooks
    .command('retry')
    .description('send now what waits out its backoff for an endpoint (a receiver back up)')
    .argument('<id>', 'the endpoint id', id)
    .action(async (endpointId: number) => {
      const { cmdWebhooksRetry } = await import('./webhooks.js');
      state.exitCode = await cmdWebhooksRetry(config(), io, { id: endpointId });
    });

  webhooks
    .command('rotate-secret')
    .description('a new signing secret, printed once; the old one signs beside it for 24 h')
    .argument('<id>', 'the endpoint id', id)
    .action(async (endpointId: number) => {
      const { cmdWebhooksRotate } = await import('./webhooks.js');
      state.exitCode = await cmdWebhooksRotate(config(), io, { id: endpointId });
    });

  webhooks
    .command('remove')
    .description(
      'take an endpoint away: says what still waited for it (not sent); its past deliveries stay readable until the retention',
    )
    .argument('<id>', 'the endpoint id', id)
    .action(async (endpointId: number) => {
      const { cmdWebhooksRemove } = await import('./webhooks.js');
      state.exitCode = await cmdWebhooksRemove(config(), io, { id: endpointId });
    });

  webhooks
    .command('deliveries')
    .description("an endpoint's latest deliveries and how each went")
    .argument('<id>', 'the endpoint id', id)
    .option('--failed', 'only dead letters and deliveries being retried')
    .option('--limit <n>', 'how many, newest first', intArg('--limit', 1, 10_000), 50)
    .option('--json', 'one JSON array')
    .action(async (endpointId: number, opts: { failed?: boolean; json?: boolean; limit: number }) => {
      const { cmdWebhooksDeliveries } = await import('./webhooks-deliveries.js');
      state.exitCode = await cmdWebhooksDeliveries(config(), io, {
        id: endpointId,
        failed: opts.failed ?? false,
        json: opts.json ?? false,
        limit: opts.limit,
      });
    });

  webhooks
    .command('replay')
    .description('send an endpoint every event again from a feed cursor or a time')
    .argument('<id>', 'the endpoint id', id)
    .requiredOption(
      '--since <cursor|time>',
      'a change-feed cursor or an ISO time like 2026-11-26T10:00:00Z',
      parsedBy(parseSince),
    )
    .action(async (endpointId: number, opts: { since: Since }) => {
      const { cmdWebhooksReplay } = await import('./webhooks-deliveries.js');
      state.exitCode = await cmdWebhooksReplay(config(), io, { id: endpointId, since: opts.since });
    });

  for (const command of webhooks.commands) {
    command.showHelpAfterError(`(run cards-sync webhooks ${command.name()} --help for usage)`);
  }
}
