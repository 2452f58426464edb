import { recordAdminAction } from '../../db/audit/index.js';
import { createDb } from '../../db/client.js';
import { rootCause } from '../../db/errors.js';
import type { StoredToken } from '../../db/sync/index.js';
import { countToRotate, rotateBatch } from '../../db/tokens/index.js';
import { cliActor } from '../audit/index.js';
import { type Config, requireCardTokens } from '../config/index.js';
import { liveFleet, nameProcesses, workersLacking } from '../fleet/index.js';
import { CliError, ConfigError } from '../shared/index.js';
import {
  CardConflictError,
  CardNotFoundError,
  cardTokens,
  readCardToken,
  TokenKeyError,
} from '../tokens/index.js';
import { resealEndpointSecrets } from '../webhooks/index.js';
import type { Io } from './common.js';
import { describeDbError } from './db-problem.js';
import { refuseWhenBehind } from './release-check.js';

// `cards-sync token --card-id N` and `cards-sync tokens rotate` (docs/commands.md).

/** Prints one card's token on stdout for a consumer that must charge it; leaves an audit row. */
export async function cmdToken(
  config: Config,
  io: Io,
  opts: { cardId: number; force: boolean },
): Promise<number> {
  if (io.stdoutIsTTY && !opts.force) {
    throw new CliError(
      `refusing to print a card token to a terminal: pipe it to the program that needs it (cards-sync token --card-id ${opts.cardId} | …), or pass --force`,
      2,
    );
  }
  const handle = createDb(config.databaseUrl, { max: 1, timeoutMs: config.databaseTimeoutMs });
  try {
    const token = await readCardToken(handle.db, cardTokens(false, config.tokens.ring), opts.cardId, {
      actor: cliActor(io.env),
      source: 'cli',
    });
    io.out(token);
    return 0;
  } catch (error) {
    if (error instanceof CardNotFoundError || error instanceof CardConflictError)
      throw new CliError(error.message, 1);
    if (error instanceof TokenKeyError) throw new CliError(error.message, 1);
    throw new CliError(describeDbError(error, config.databaseUrl) ?? `token: ${rootCause(error).message}`, 1);
  } finally {
    await handle.close();
  }
}

export interface RotateOptions {
  batchSize: number;
  /** Rest between batches, to go easy on a busy database. */
  pauseMs: number;
}

/**
 * Re-seals every stored token under the ring's first key, plain-text ones included, in batches
 * that commit one by one: safe to kill and run again, safe beside running workers.
 */
export async function cmdTokensRotate(config: Config, io: Io, opts: RotateOptions): Promise<number> {
  if (config.tokens.encryption === 'off') {
    throw new ConfigError(
      'CARD_TOKEN_ENCRYPTION is off, and `tokens rotate` seals tokens: set CARD_TOKEN_ENCRYPTION=on (and tell the workers the same)',
      'CARD_TOKEN_ENCRYPTION',
    );
  }
  const tokens = requireCardTokens(config.tokens);
  const ring = config.tokens.ring!;
  const primary = ring.primaryId;
  // Re-sealing writes saved_cards: a release older than the newest breaking migration must not.
  await refuseWhenBehind(config, 'tokens rotate');
  const handle = createDb(config.databaseUrl, { max: 2, timeoutMs: config.databaseTimeoutMs });
  // A token re-sealed under a key some live worker lacks fails that worker's syncs: refuse.
  const lacking = workersLacking(await liveFleet(handle.pool).catch(() => []), primary);
  if (lacking.length > 0) {
    await handle.close();
    throw new CliError(
      `tokens rotate would seal under key ${primary}, which ${lacking.length} live worker${lacking.length === 1 ? '' : 's'} ` +
        `do${lacking.length === 1 ? 'es' : ''} not hold: ${nameProcesses(lacking)}. Restart ${lacking.length === 1 ? 'it' : 'them'} ` +
        `with a CARD_TOKEN_KEYS that holds ${primary}, then rotate`,
      1,
    );
  }
  const actor = cliActor(io.env);
  const unreadable = new Map<number, string>();
  const reseal = (row: { id: number; token: StoredToken }): StoredToken | undefined => {
    try {
      return tokens.store(row.id, tokens.reveal(row.id, row.token));
    } catch (error) {
      if (!(error instanceof TokenKeyError)) throw error;
      unreadable.set(row.id, error.message);
      return undefined;
    }
  };
  try {
    const total = await countToRotate(handle.pool, primary);
    await recordAdminAction(handle.db, {
      actor,
      source: 'cli',
      action: 'tokens_rotate',
      detail: { state: 'started', key: primary, toRotate: total },
    });
    let rotated = 0;
    let plain = 0;
    let lastLine = 0;
    let remaining = total;
    // Rows a sync held were skipped; a few passes pick them up.
    for (let pass = 1; pass <= 5 && remaining - unreadable.size > 0; pass++) {
      let cursor = 0;
      for (;;) {
        const batch = await rotateBatch(handle.pool, primary, cursor, opts.batchSize, reseal);
        rotated += batch.rotated;
        plain += batch.plain;
        cursor = batch.lastId;
        if (Date.now() - lastLine >= 1000 || batch.seen < opts.batchSize) {
          lastLine = Date.now();
          const pct = total === 0 ? 100 : Math.min(100, Math.floor((rotated / total) * 100));
          io.err(`tokens rotate: ${rotated}/${total} re-sealed under key ${primary} (${pct}%)`);
        }
        if (batch.seen < opts.batchSize) break;
        if (opts.pauseMs > 0) await new Promise((r) => setTimeout(r, opts.pauseMs));
      }
      remaining = await countToRotate(handle.pool, primary);
      if (remaining - unreadable.size > 0) await new Promise((r) => setTimeout(r, 200));
    }
    const busy = remaining - unreadable.size;
    // Webhook signing secrets are sealed under the same ring (src/webhooks/endpoint-secrets.ts).
    const secrets = await resealEndpointSecrets(handle.pool, ring);
    for (const message of secrets.unreadable) unreadable.set(-unreadable.size - 1, message);
    await recordAdminAction(handle.db, {
      actor,
      source: 'cli',
      action: 'tokens_rotate',
      detail: {
        state: 'finished',
        key: primary,
        rotated,
        plain,
        unreadable: unreadable.size,
        busy,
        webhookSecrets: secrets.resealed,
      },
    });
    io.out(
      `re-sealed ${rotated} token${rotated === 1 ? '' : 's'} under key ${primary} (${plain} had been stored in plain text)` +
        (secrets.resealed > 0
          ? ` and the signing secrets of ${secrets.resealed} webhook endpoint${secrets.resealed === 1 ? '' : 's'}`
          : ''),
    );
    for (const message of [...unreadable.values()].slice(0, 10))
      io.err(`tokens rotate: left as it is: ${message}`);
    if (unreadable.size > 0) {
      io.out(
        `${unreadable.size} token${unreadable.size === 1 ? '' : 's'} could not be read and were left as they are`,
      );
      return 1;
    }
    if (busy > 0) {
      io.out(
        `${busy} row${busy === 1 ? ' was' : 's were'} busy throughout; run \`cards-sync tokens rotate\` again`,
      );
      return 1;
    }
    io.out(
      `every stored token is sealed under key ${primary}; keys no longer used may leave CARD_TOKEN_KEYS`,
    );
    return 0;
  } catch (error) {
    if (error instanceof CliError || error instanceof ConfigError) throw error;
    throw new CliError(
      describeDbError(error, config.databaseUrl) ?? `tokens rotate: ${rootCause(error).message}`,
      1,
    );
  } finally {
    await handle.close();
  }
}
