import { describe, expect, it } from 'vitest';
import { containsCardNumber } from '../../src/shared/index.js';
import { luhnNumber, notLuhn, otherScript, prng, written } from '../support/card-numbers.js';
import { makeCard } from '../support/fixtures.js';
import { useTestDatabase } from '../support/helpers.js';

// The database keeps the rule itself (migration 0013): a writer other than cards-sync cannot store
// a full card number, or a control character, in saved_cards' free-text columns.

const database = useTestDatabase();
const query = (text: string, values: unknown[] = []) => database.handle.pool.query(text, values);

async function insertCard(id: number, family: string, bankName: string) {
  const c = makeCard(9901, { id });
  return query(
    `insert into saved_cards (id, subscriber_id, card_token, bin_number, card_family, card_bank_code,
       card_bank_name, company_id, create_date, first_seen_at, last_seen_at, updated_at)
     values ($1, $2, 'sealed', $3, $4, 1, $5, 1, now(), now(), now(), now())`,
    [id, c.subscriberId, c.binNumber, family, bankName],
  );
}

describe('saved_cards refuses, whoever writes', () => {
  it('a full card number in card_family or card_bank_name, on insert and on update, naming the card and column only', async () => {
    const random = prng(99);
    for (let i = 0; i < 40; i++) {
      const value = `VISA ${written(luhnNumber(13 + (i % 7), random), random)}`;
      const error = await insertCard(50_000 + i, i % 2 ? value : 'Bonus', i % 2 ? 'AKBA' : value).catch(
        (e: Error & { code?: string }) => e,
      );
      expect(error, value).toBeInstanceOf(Error);
      expect((error as { code?: string }).code).toBe('23514');
      expect((error as Error).message).toMatch(
        new RegExp(
          `^saved_cards\\.card_(family|bank_name) of card ${50_000 + i} holds a (full card number|control character); refused$`,
        ),
      );
    }
    await insertCard(51_000, 'Bonus', 'AKBA');
    await expect(
      query(`update saved_cards set card_bank_name = 'AKBA 5500/0055/5555/5559' where id = 51000`),
    ).rejects.toThrow(/card_bank_name of card 51000 holds a full card number/);
    await expect(
      query(`update saved_cards set card_family = $1 where id = 51000`, ['\u001b[2J']),
    ).rejects.toThrow(/card_family of card 51000 holds a control character/);
    const [row] = (await query('select card_family, card_bank_name from saved_cards where id = 51000')).rows;
    expect(row).toEqual({ card_family: 'Bonus', card_bank_name: 'AKBA' });
  });

  it('agrees with the application’s rule, text for text', async () => {
    const random = prng(100);
    const texts: string[] = [];
    for (let i = 0; i < 300; i++) {
      const number = luhnNumber(13 + (i % 7), random);
      texts.push(written(i % 3 === 0 ? notLuhn(number) : number, random));
    }
    texts.push(otherScript('4111111111111111', 0xff10), 'tok00000000000000000000001000001', 'Bonus 2021');
    const { rows } = await query(
      'select t, cards_sync_text_problem(t) is not distinct from $2 as found from unnest($1::text[]) t',
      [texts, 'a full card number'],
    );
    for (const row of rows as { t: string; found: boolean }[]) {
      if (/\t/.test(row.t)) continue; // a tab is a control character to both, before the number
      expect(row.found, JSON.stringify(row.t)).toBe(containsCardNumber(row.t));
    }
  });
});
