import { createDb } from '../../db/client.js';
import { rootCause } from '../../db/errors.js';
import {
  findSubscriberIdByEmail,
  readStoredCards,
  type SavedCard,
  type StoredCard,
} from '../../db/sync/index.js';
import { createApiClient, type Target } from '../api/index.js';
import { type Config, requireApi, requireCardTokens } from '../config/index.js';
import { CliError } from '../shared/index.js';
import { reconcile } from '../sync/index.js';
import { TokenKeyError } from '../tokens/index.js';
import type { Io } from './common.js';
import { describeDbError } from './db-problem.js';

/** Columns a person may see the values of (never the token). */
const SHOWN: Record<string, (c: SavedCard | StoredCard) => unknown> = {
  subscriber_id: (c) => c.subscriberId,
  bin_number: (c) => c.binNumber,
  card_family: (c) => c.cardFamily,
  card_bank_code: (c) => c.cardBankCode,
  card_bank_name: (c) => c.cardBankName,
  company_id: (c) => c.companyId,
  create_date: (c) => (c.createDate instanceof Date ? c.createDate.toISOString() : c.createDate),
};

const describe = (c: SavedCard | StoredCard) =>
  `card ${c.id} ${c.binNumber} ${c.cardBankName}${c.cardFamily ? ` (${c.cardFamily})` : ''}`;

/**
 * `cards-sync sync --dry-run`: fetches and validates the answer as a sync would, and prints what it
 * would change against what is stored. Writes nothing, takes no lock, records no run.
 */
export async function cmdDryRun(
  config: Config,
  io: Io,
  target: Target,
  options: { json?: boolean },
): Promise<number> {
  const tokens = requireCardTokens(config.tokens);
  const api = createApiClient(requireApi(config), { connections: 1 });
  const handle = createDb(config.databaseUrl, { max: 1, timeoutMs: config.databaseTimeoutMs });
  try {
    const outcome = await api.fetchCards(target);
    if (outcome.kind !== 'ok') {
      const why = 'message' in outcome ? `: ${outcome.message}` : '';
      const what = outcome.kind === 'transient' ? `${outcome.kind} (${outcome.code})` : outcome.kind;
      io.out(`dry run: the API answered ${outcome.status ?? '-'}, ${what}${why}; nothing would be written`);
      return 1;
    }
    const subscriberId =
      'subscriberId' in target
        ? target.subscriberId
        : (outcome.cards[0]?.subscriberId ?? (await findSubscriberIdByEmail(handle.db, target.email)));
    if (subscriberId === undefined) {
      io.out(
        'dry run: the API lists no card for this e-mail and no subscriber is stored for it; nothing would change',
      );
      return 0;
    }
    let stored: StoredCard[];
    try {
      stored = await readStoredCards(
        handle.pool,
        subscriberId,
        outcome.cards.map((c) => c.id),
      );
    } catch (error) {
      throw new CliError(
        describeDbError(error, config.databaseUrl) ?? `cannot read Postgres: ${rootCause(error).message}`,
        1,
      );
    }
    // A card another subscriber holds as active stays with it (a conflict), as in a real sync.
    const held = new Map(
      stored
        .filter((s) => s.subscriberId !== subscriberId && s.removedAt === null)
        .map((s) => [s.id, s.subscriberId]),
    );
    const claimed = outcome.cards.filter((card) => held.has(card.id));
    let plan: ReturnType<typeof reconcile>;
    try {
      const listed = outcome.cards.filter((card) => !held.has(card.id));
      plan = reconcile(subscriberId, listed, stored, (row, token) =>
        tokens.matches(row.id, row.token, token),
      );
    } catch (error) {
      if (error instanceof TokenKeyError) throw new CliError(`dry run: ${error.message}`, 1);
      throw error;
    }
    const byId = new Map(stored.map((s) => [s.id, s]));
    const lines: string[] = [];
    for (const c of plan.inserts) lines.push(`  + ${describe(c)}: new`);
    for (const u of plan.updates) {
      const before = byId.get(u.card.id)!;
      const changes = u.changedFields.map((f) =>
        SHOWN[f]
          ? `${f} ${JSON.stringify(SHOWN[f](before))} → ${JSON.stringify(SHOWN[f](u.card))}`
          : `${f} changed`,
      );
      const head = u.restored ? `  ↺ ${describe(u.card)}: restored` : `  ~ ${describe(u.card)}:`;
      lines.push(`${head}${changes.length ? ` ${changes.join(', ')}` : ''}`);
    }
    for (const id of plan.removedIds)
      lines.push(`  - ${describe(byId.get(id)!)}: no longer listed, would be marked removed`);
    for (const card of claimed)
      lines.push(
        `  ! ${describe(card)}: subscriber ${held.get(card.id)} holds it; a conflict, it would stay there`,
      );
    const c = { ...plan.counts, cardsSeen: outcome.cards.length };
    if (options.json) {
      io.out(
        JSON.stringify({
          subscriberId,
          counts: c,
          inserts: plan.inserts.map((card) => card.id),
          updates: plan.updates.map((u) => ({
            id: u.card.id,
            changedFields: u.changedFields,
            restored: u.restored,
          })),
          removed: plan.removedIds,
          conflicts: claimed.map((card) => ({ id: card.id, heldBy: held.get(card.id) })),
          written: false,
        }),
      );
    } else {
      io.out(
        `dry run: subscriber ${subscriberId}: ${c.cardsSeen} ${c.cardsSeen === 1 ? 'card' : 'cards'} upstream; would insert ${c.inserted}, ` +
          `update ${c.updated}, restore ${c.restored}, remove ${c.removed}, leave ${c.unchanged} unchanged` +
          `${claimed.length > 0 ? `, leave ${claimed.length} in conflict` : ''} (nothing written)`,
      );
      for (const line of lines) io.out(line);
    }
    return 0;
  } finally {
    await Promise.all([api.close(), handle.close()]);
  }
}
