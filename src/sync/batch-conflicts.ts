import type pg from 'pg';
import { claimKey, openClaims } from '../../db/sync/index.js';
import type { Planned } from './batch-plan.js';

/**
 * Which of the batch's claims open a conflict (the others are open already), and which of its
 * moves end one. Asked of Postgres only when the batch has a claim or a move (rare): one round
 * trip, under the batch's locks.
 */
export async function conflictsOf(
  client: pg.PoolClient,
  writing: readonly Planned[],
): Promise<{ opening: Set<string>; resolving: Set<string> }> {
  const claims = writing.flatMap((p) => p.claims);
  const moves = writing.flatMap((p) =>
    p.plan!.updates.flatMap((u) =>
      u.previousSubscriberId !== undefined
        ? [
            {
              cardId: u.card.id,
              holderSubscriberId: u.previousSubscriberId,
              claimantSubscriberId: p.item.subscriberId!,
            },
          ]
        : [],
    ),
  );
  if (claims.length === 0 && moves.length === 0) return { opening: new Set(), resolving: new Set() };
  const open = await openClaims(client, [...claims, ...moves]);
  return {
    opening: new Set(claims.map(claimKey).filter((k) => !open.has(k))),
    resolving: new Set(moves.map(claimKey).filter((k) => open.has(k))),
  };
}
