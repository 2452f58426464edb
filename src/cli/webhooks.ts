import { createDb, type DbHandle } from '../../db/client.js';
import {
  listEndpoints,
  removeEndpoint,
  retryWaitingNow,
  setEndpointEnabled,
} from '../../db/webhooks/index.js';
import type { Config } from '../config/index.js';
import { changeEventsInEffect, TURN_EVENTS_ON } from '../events/index.js';
import { CliError, ConfigError, formatTime } from '../shared/index.js';
import type { KeyRing } from '../tokens/index.js';
import {
  assertPublicUrl,
  feedHead,
  insertEndpoint,
  nearRetention,
  nearRetentionText,
  pendingText,
  rotateEndpointSecret,
  shownUrl,
  urlWithoutQuery,
  WebhookAddressError,
  waitingText,
} from '../webhooks/index.js';
import { auditCli } from './audit.js';
import type { Io } from './common.js';
import { describeDbError } from './db-problem.js';

// `cards-sync webhooks add|list|disable|enable|rotate-secret|remove` (docs/commands.md). A secret is printed
// once, on stdout, by `add` and `rotate-secret`; it is never in a log line, an error or the audit.

/** Webhook secrets are sealed under the card-token key ring: no ring, no webhooks. */
function requireRing(config: Config): KeyRing {
  const ring = config.tokens.ring;
  if (ring === undefined) {
    throw new ConfigError(
      'CARD_TOKEN_KEYS is not set: webhook signing secrets are sealed at rest under the card-token key ring; set CARD_TOKEN_KEYS or CARD_TOKEN_KEYS_FILE',
      'CARD_TOKEN_KEYS',
    );
  }
  return ring;
}

export async function withDb<T>(config: Config, work: (handle: DbHandle) => Promise<T>): Promise<T> {
  const handle = createDb(config.databaseUrl, { max: 2, timeoutMs: config.databaseTimeoutMs });
  try {
    return await work(handle);
  } catch (error) {
    const described = describeDbError(error, config.databaseUrl);
    if (described !== undefined) throw new CliError(described, 1);
    throw error;
  } finally {
    await handle.close().catch(() => {});
  }
}

export async function cmdWebhooksAdd(
  config: Config,
  io: Io,
  o: { url: string; types: string[] | null; description: string },
): Promise<number> {
  const ring = requireRing(config);
  if (!config.webhooks.allowPrivate) {
    try {
      await assertPublicUrl(new URL(o.url));
    } catch (error) {
      if (error instanceof WebhookAddressError) throw new CliError(error.message, 2);
      const code = (error as { code?: string }).code ?? 'no answer';
      throw new CliError(`cannot resolve ${new URL(o.url).hostname} (${code}): check the URL`, 2);
    }
  }
  const added = await withDb(config, async (handle) => {
    const endpoint = await insertEndpoint(handle.pool, ring, {
      ...o,
      eventTypes: o.types,
      feedCursor: await feedHead(handle.pool),
    });
    await auditCli(
      config,
      io,
      'webhooks_add',
      { endpoint: endpoint.id, url: shownUrl(o.url), types: o.types },
      handle.db,
    );
    return { ...endpoint, events: await changeEventsInEffect(handle.pool, config.changeEvents) };
  });
  io.out(
    `webhook endpoint ${added.id} added: ${shownUrl(o.url)} (types: ${o.types?.join(',') ?? 'all'}); it receives events from now on`,
  );
  io.out(`signing secret (shown once, store it now): ${added.secret}`);
  if (added.events.state !== 'on') {
    io.err(
      `warning: change events are ${added.events.says}: this endpoint receives nothing from syncs that write none; ${TURN_EVENTS_ON}`,
    );
  }
  return 0;
}

export async function cmdWebhooksList(config: Config, io: Io, o: { json: boolean }): Promise<number> {
  const endpoints = await withDb(config, (handle) => listEndpoints(handle.pool));
  const shown = endpoints.map((e) => ({
    id: e.id,
    url: shownUrl(e.url),
    description: e.description,
    types: e.eventTypes,
    enabled: e.enabled,
    disabledReason: e.disabledReason,
    lagSeconds: e.lagSeconds,
    failing: e.failingSince !== null,
    failingSince: e.failingSince?.toISOString() ?? null,
    pending: e.pending,
    pendingCapped: e.pendingCapped,
    nearRetention: nearRetention(e.lagSeconds, config.changeEventsRetentionDays),
    deadLetters: e.deadLetters,
    createdAt: e.createdAt.toISOString(),
  }));
  if (o.json) {
    io.out(JSON.stringify(shown));
    return 0;
  }
  if (shown.length === 0) {
    io.out('no webhook endpoints; add one with `cards-sync webhooks add URL`');
    return 0;
  }
  for (const e of shown) {
    const state = e.enabled
      ? e.failing
        ? `failing since ${formatTime(e.failingSince)}`
        : 'enabled'
      : `disabled: ${e.disabledReason ?? ''}`;
    io.out(
      `${e.id}  ${e.url}  types ${e.types?.join(',') ?? 'all'}  ${state}  pending ${pendingText(e)}  lag ${e.lagSeconds}s  dead letters ${e.deadLetters}` +
        (e.description === '' ? '' : `  "${e.description}"`),
    );
    if (e.nearRetention) io.out(`    ${nearRetentionText(e, config.changeEventsRetentionDays)}`);
  }
  return 0;
}

export async function cmdWebhooksEnable(
  config: Config,
  io: Io,
  o: { id: number; enabled: boolean },
): Promise<number> {
  const found = await withDb(config, async (handle) => {
    const done = await setEndpointEnabled(handle.pool, o.id, o.enabled, 'disabled by an operator');
    if (done)
      await auditCli(
        config,
        io,
        o.enabled ? 'webhooks_enable' : 'webhooks_disable',
        { endpoint: o.id },
        handle.db,
      );
    return done;
  });
  if (!found) throw new CliError(`no webhook endpoint ${o.id}; \`cards-sync webhooks list\` shows them`, 2);
  io.out(
    o.enabled
      ? `webhook endpoint ${o.id} enabled: what waited is sent now`
      : `webhook endpoint ${o.id} disabled: events keep for it until \`cards-sync webhooks enable ${o.id}\``,
  );
  return 0;
}

/** `webhooks retry ID`: what waits out its backoff for an endpoint goes out at the next claim. */
export async function cmdWebhooksRetry(config: Config, io: Io, o: { id: number }): Promise<number> {
  const done = await withDb(config, async (handle) => {
    const outcome = await retryWaitingNow(handle.pool, o.id);
    if (outcome !== undefined && 'retried' in outcome)
      await auditCli(config, io, 'webhooks_retry', { endpoint: o.id, retried: outcome.retried }, handle.db);
    return outcome;
  });
  if (done === undefined)
    throw new CliError(`no webhook endpoint ${o.id}; \`cards-sync webhooks list\` shows them`, 2);
  if ('disabled' in done)
    throw new CliError(
      `webhook endpoint ${o.id} is disabled; \`cards-sync webhooks enable ${o.id}\` sends what waited for it`,
      2,
    );
  io.out(
    `webhook endpoint ${o.id}: ${done.retried} deliver${done.retried === 1 ? 'y' : 'ies'} waiting out a backoff ${done.retried === 1 ? 'is' : 'are'} due now; the workers send ${done.retried === 1 ? 'it' : 'them'} at their next claim`,
  );
  return 0;
}

export async function cmdWebhooksRotate(config: Config, io: Io, o: { id: number }): Promise<number> {
  const ring = requireRing(config);
  const secret = await withDb(config, async (handle) => {
    const fresh = await rotateEndpointSecret(handle.pool, ring, o.id);
    if (fresh !== undefined)
      await auditCli(config, io, 'webhooks_rotate_secret', { endpoint: o.id }, handle.db);
    return fresh;
  });
  if (secret === undefined)
    throw new CliError(`no webhook endpoint ${o.id}; \`cards-sync webhooks list\` shows them`, 2);
  io.out(`webhook endpoint ${o.id}: new signing secret; the old one signs beside it for 24 h`);
  io.out(`signing secret (shown once, store it now): ${secret}`);
  return 0;
}

export async function cmdWebhooksRemove(config: Config, io: Io, o: { id: number }): Promise<number> {
  const outcome = await withDb(config, async (handle) => {
    const removal = await removeEndpoint(handle.pool, o.id);
    if (removal?.removed === true) {
      await auditCli(
        config,
        io,
        'webhooks_remove',
        {
          endpoint: o.id,
          url: urlWithoutQuery(removal.url),
          pending: removal.waiting.pending,
          pendingCapped: removal.waiting.pendingCapped,
          lagSeconds: removal.waiting.lagSeconds,
        },
        handle.db,
      );
    }
    return removal;
  });
  if (outcome === undefined)
    throw new CliError(`no webhook endpoint ${o.id}; \`cards-sync webhooks list\` shows them`, 2);
  if (!outcome.removed)
    throw new CliError(
      `webhook endpoint ${o.id} was removed already, at ${formatTime(outcome.removedAt)}`,
      2,
    );
  io.out(
    `webhook endpoint ${o.id} removed: ${shownUrl(outcome.url)}; ${waitingText(outcome.waiting)} still waited for it and will not be sent`,
  );
  io.out(
    `its past deliveries stay readable (cards-sync webhooks deliveries ${o.id}) for ${config.changeEventsRetentionDays} days (CHANGE_EVENTS_RETENTION_DAYS)`,
  );
  return 0;
}
