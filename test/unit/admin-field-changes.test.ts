import { describe, expect, it } from 'vitest';
import type { SubscriberPageData } from '../../db/admin/index.js';
import { fieldChanges } from '../../src/admin/field-changes.js';

// The ops page's history shows each changed field as old → new: the new value is the
// next change's `previous` of that field, or the card's value now.

type Change = SubscriberPageData['changes'][number];
const at = (minute: number) => new Date(Date.UTC(2026, 10, 25, 10, minute));
const change = (
  id: number,
  minute: number,
  fields: string[] | null,
  previous: Record<string, unknown> | null,
): Change => ({
  id,
  changedAt: at(minute),
  cardId: 7,
  change: 'updated',
  changedFields: fields,
  previous,
  reason: null,
  syncRunId: id,
});

describe('the history of a card, field by field', () => {
  it('chains each change to the next, and the last to the card as it is now', () => {
    const changes = [
      change(3, 3, ['card_bank_name', 'card_token'], { card_bank_name: 'B', card_token: 'changed' }),
      change(2, 2, ['card_bank_name'], { card_bank_name: 'A' }),
      change(1, 1, ['card_family'], null),
    ];
    const card = {
      id: 7,
      cardBankName: 'C',
      cardFamily: 'World',
    } as unknown as SubscriberPageData['cards'][number];
    const shown = fieldChanges(changes, [card]);
    expect(shown.get(2)).toEqual(['card_bank_name: A → B']);
    expect(shown.get(3)).toEqual(['card_bank_name: B → C', 'card_token: changed']);
    // Written before `previous` existed: which column, not from what.
    expect(shown.get(1)).toEqual(['card_family']);
  });
});
