import { recordAdminAction } from '../../db/audit/index.js';
import { createDb, type Db, poolOf } from '../../db/client.js';
import type { AdminSource } from '../../db/schema/index.js';
import { type OpenConflict, openConflictsOf } from '../../db/sync/index.js';
import { readStoredToken } from '../../db/tokens/index.js';
import { cliActor } from '../audit/index.js';
import { type CardTokens, cardTokens } from './card-tokens.js';
import { parseKeyRing } from './keyring.js';

/** No card of that id is stored. */
export class CardNotFoundError extends Error {
  override readonly name = 'CardNotFoundError';
  constructor(readonly cardId: number) {
    super(`card ${cardId} is not stored`);
  }
}

/**
 * The card is listed by two subscribers at once (db/schema/index.ts, card_conflicts): whose it is is not
 * known, so its token is not handed out. Charging it could charge the wrong customer.
 */
export class CardConflictError extends Error {
  override readonly name = 'CardConflictError';
  readonly code = 'card_conflict';
  constructor(
    readonly cardId: number,
    conflicts: readonly OpenConflict[],
  ) {
    const first = conflicts[0]!;
    const others = conflicts.map((c) => c.claimantSubscriberId).join(', ');
    super(
      `card ${cardId} is in conflict: subscriber ${first.holderSubscriberId} holds it and subscriber ${others} ` +
        `also lists it (since ${first.openedAt.toISOString()}); its token is not handed out until the ` +
        `holder's answer no longer lists it or the other's no longer does (re-sync both with cards-sync enqueue)`,
    );
  }
}

/**
 * The token of one stored card, for a consumer that must charge it. Every read leaves an
 * `admin_actions` row (`token_read`, the card and its subscriber; never the token). Throws
 * {@link CardNotFoundError}, {@link CardConflictError} (a `token_refused` row), or `TokenKeyError` when the token's key is not in the ring or the
 * stored value was altered.
 */
export async function readCardToken(
  db: Db,
  tokens: CardTokens,
  cardId: number,
  who: { actor: string; source: AdminSource },
): Promise<string> {
  const stored = await readStoredToken(poolOf(db), cardId);
  if (stored === undefined) throw new CardNotFoundError(cardId);
  const conflicts = await openConflictsOf(db, cardId);
  if (conflicts.length > 0) {
    await recordAdminAction(db, {
      ...who,
      action: 'token_refused',
      detail: {
        cardId,
        reason: 'card_conflict',
        subscriberIds: conflicts.map((c) => c.claimantSubscriberId),
      },
    });
    throw new CardConflictError(cardId, conflicts);
  }
  const token = tokens.reveal(cardId, stored.token);
  await recordAdminAction(db, {
    ...who,
    action: 'token_read',
    detail: { cardId, subscriberId: stored.subscriberId },
  });
  return token;
}

/**
 * The package's way for a billing job to read one card's token:
 * `await fetchCardToken({ databaseUrl, keys: process.env.CARD_TOKEN_KEYS, cardId: 123 })`.
 * `keys` is a CARD_TOKEN_KEYS value; `actor` defaults to the OS user.
 */
export async function fetchCardToken(options: {
  databaseUrl: string;
  keys?: string | undefined;
  cardId: number;
  actor?: string;
}): Promise<string> {
  const ring = options.keys === undefined ? undefined : parseKeyRing(options.keys);
  const handle = createDb(options.databaseUrl, { max: 1 });
  try {
    return await readCardToken(handle.db, cardTokens(false, ring), options.cardId, {
      actor: options.actor ?? cliActor(),
      source: 'cli',
    });
  } finally {
    await handle.close();
  }
}
