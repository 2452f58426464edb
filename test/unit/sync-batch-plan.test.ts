import { describe, expect, it } from 'vitest';
import type { BatchRead, StoredCard } from '../../db/sync/index.js';
import { indexStored, plan, runRow, SUPERSEDED, toWrite } from '../../src/sync/batch-plan.js';
import { cardTokens } from '../../src/tokens/index.js';
import { answerOf, makeCard, storedCardOf, testTokens } from '../support/fixtures.js';

// How a batch's answers turn into rows once the stored ones are read (src/sync/batch-plan.ts), as
// pure code: an answer older than one applied, an answer the digest says is unchanged, a card
// another subscriber holds (a conflict) or has let go (a move), and the token as it is written.

const plain = cardTokens(false, undefined);

function read(stored: StoredCard[], over: Partial<BatchRead> = {}): BatchRead {
  return { now: new Date(), newest: new Map(), unchanged: new Set(), schedules: new Map(), stored, ...over };
}

describe('a batch plan', () => {
  it('an answer fetched before one already applied for its subscriber is superseded: nothing but its run is written', () => {
    const card = makeCard(7);
    const item = answerOf(7, [card], {});
    const later = new Date(item.run.startedAt.getTime() + 1000);
    const p = plan(
      item,
      'digest',
      indexStored(read([], { newest: new Map([[7, later]]) })),
      plain,
      new Set([7]),
    );
    expect(p).toMatchObject({ superseded: true, plan: null });
    expect(runRow(p)).toMatchObject({ status: 'superseded', errorMessage: SUPERSEDED });
  });

  it('an answer whose digest is the stored one is unchanged, without reading a card', () => {
    const cards = [makeCard(7), makeCard(7)];
    const p = plan(
      answerOf(7, cards),
      'digest',
      indexStored(read([], { unchanged: new Set([7]) })),
      plain,
      new Set([7]),
    );
    expect(p.unchanged).toBe(true);
    expect(p.plan!.counts).toMatchObject({ cardsSeen: 2, unchanged: 2, inserted: 0, removed: 0 });
    expect(runRow(p)).toMatchObject({ status: 'succeeded', unchanged: 2 });
  });

  it('a card another subscriber still holds is a claim (a conflict), not taken; it still counts as seen', () => {
    const theirs = makeCard(8);
    const mine = makeCard(7);
    const stored = indexStored(read([storedCardOf(theirs), storedCardOf(mine)]));
    const p = plan(answerOf(7, [mine, { ...theirs, subscriberId: 7 }]), 'd', stored, plain, new Set([7]));
    expect(p.claims).toEqual([{ cardId: theirs.id, holderSubscriberId: 8, claimantSubscriberId: 7 }]);
    expect(p.plan!.updates).toEqual([]);
    expect(p.plan!.counts).toMatchObject({ cardsSeen: 2, unchanged: 1 });
  });

  it('a card held by a subscriber whose own answer this batch writes moves, rather than conflicting', () => {
    const card = makeCard(8);
    const stored = indexStored(read([storedCardOf(card)]));
    const p = plan(answerOf(7, [{ ...card, subscriberId: 7 }]), 'd', stored, plain, new Set([7, 8]));
    expect(p.claims).toEqual([]);
    expect(p.plan!.updates[0]).toMatchObject({ previousSubscriberId: 8 });
  });

  it('an unknown e-mail writes its run only', () => {
    const p = plan({ ...answerOf(7, []), subscriberId: null }, null, indexStored(read([])), plain, new Set());
    expect(p).toMatchObject({ plan: null, superseded: false });
  });

  it('a token is written sealed when sealing is on, kept as stored when unchanged, resealed when stored plain', () => {
    const card = makeCard(7);
    const sealedNew = toWrite(card, undefined, testTokens);
    expect(sealedNew.token.fingerprint).not.toBeNull();
    expect(sealedNew.token.value).not.toContain(card.cardToken);
    const stored = storedCardOf(card, { token: sealedNew.token });
    expect(toWrite(card, stored, testTokens).token).toEqual(sealedNew.token);
    const fromPlain = toWrite(card, storedCardOf(card), testTokens);
    expect(fromPlain.token.fingerprint).not.toBeNull();
    expect(toWrite(card, undefined, plain).token).toEqual({ value: card.cardToken, fingerprint: null });
  });
});
