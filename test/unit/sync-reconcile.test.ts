import { describe, expect, it } from 'vitest';
import { reconcile, type StoredCard } from '../../src/sync/reconcile.js';
import { makeCard, storedCardOf } from '../support/fixtures.js';

// What one upstream answer means for the stored rows (src/sync/reconcile.ts), as pure code: the
// inserts, updates, restores, removals and unchanged cards a sync writes, and the history each keeps.

const sameToken = (stored: StoredCard, token: string) => stored.token.value === token;

describe('reconcile', () => {
  it('an answer identical to the copy changes nothing but the cards seen', () => {
    const cards = [makeCard(7), makeCard(7)];
    const plan = reconcile(
      7,
      cards,
      cards.map((c) => storedCardOf(c)),
      sameToken,
    );
    expect(plan.inserts).toEqual([]);
    expect(plan.updates).toEqual([]);
    expect(plan.removedIds).toEqual([]);
    expect(plan.unchangedIds).toEqual(cards.map((c) => c.id));
    expect(plan.counts).toEqual({
      cardsSeen: 2,
      inserted: 0,
      updated: 0,
      unchanged: 2,
      removed: 0,
      restored: 0,
    });
  });

  it('a new card is inserted, a listed card no longer answered is removed', () => {
    const kept = makeCard(7);
    const gone = makeCard(7);
    const added = makeCard(7);
    const plan = reconcile(7, [kept, added], [storedCardOf(kept), storedCardOf(gone)], sameToken);
    expect(plan.inserts).toEqual([added]);
    expect(plan.removedIds).toEqual([gone.id]);
    expect(plan.counts).toMatchObject({ cardsSeen: 2, inserted: 1, unchanged: 1, removed: 1 });
  });

  it('a changed field is an update that names the columns and keeps what they held, never the token', () => {
    const card = makeCard(7, { cardFamily: 'Bonus' });
    const answered = { ...card, cardFamily: 'World', cardToken: 'tok-reissued-000000000000000000000' };
    const plan = reconcile(7, [answered], [storedCardOf(card)], sameToken);
    expect(plan.updates).toHaveLength(1);
    const [u] = plan.updates;
    expect(u!.changedFields.sort()).toEqual(['card_family', 'card_token']);
    expect(u!.previous).toEqual({ card_family: 'Bonus', card_token: 'changed' });
    expect(JSON.stringify(u!.previous)).not.toContain(card.cardToken);
    expect(u!.restored).toBe(false);
    expect(plan.counts).toMatchObject({ updated: 1, unchanged: 0 });
  });

  it('a create date is compared as an instant, whatever offset the answer writes it in', () => {
    const card = makeCard(7, { createDate: '2021-02-28T14:01:35+03:00' });
    const sameInstant = { ...card, createDate: '2021-02-28T11:01:35Z' };
    expect(reconcile(7, [sameInstant], [storedCardOf(card)], sameToken).unchangedIds).toEqual([card.id]);
  });

  it('a removed card answered again is restored, keeping when it was removed, with any change beside it', () => {
    const card = makeCard(7);
    const removedAt = new Date('2026-11-01T00:00:00Z');
    const plan = reconcile(
      7,
      [{ ...card, cardBankName: 'YKB' }],
      [storedCardOf(card, { removedAt })],
      sameToken,
    );
    expect(plan.updates).toHaveLength(1);
    expect(plan.updates[0]).toMatchObject({
      restored: true,
      changedFields: ['card_bank_name'],
      previous: { card_bank_name: 'AKBA', removed_at: removedAt.toISOString() },
    });
    expect(plan.counts).toMatchObject({ restored: 1, updated: 0 });
    // An unchanged restore is a restore, not an unchanged card.
    const plain = reconcile(7, [card], [storedCardOf(card, { removedAt })], sameToken);
    expect(plain.updates[0]).toMatchObject({ restored: true, changedFields: [] });
    expect(plain.unchangedIds).toEqual([]);
  });

  it('a card stored for another subscriber moves here, saying whose it was; it is not that subscriber’s removal here', () => {
    const theirs = makeCard(8);
    const plan = reconcile(7, [{ ...theirs, subscriberId: 7 }], [storedCardOf(theirs)], sameToken);
    expect(plan.updates[0]).toMatchObject({ previousSubscriberId: 8, changedFields: ['subscriber_id'] });
    expect(plan.updates[0]!.previous).toMatchObject({ subscriber_id: 8 });
    // Another subscriber's row the answer does not list is not removed by this sync.
    const other = makeCard(8);
    expect(reconcile(7, [], [storedCardOf(other)], sameToken).removedIds).toEqual([]);
  });

  it('a removed card not answered stays removed: it is not removed again', () => {
    const card = makeCard(7);
    const plan = reconcile(7, [], [storedCardOf(card, { removedAt: new Date() })], sameToken);
    expect(plan.removedIds).toEqual([]);
    expect(plan.counts.removed).toBe(0);
  });
});
