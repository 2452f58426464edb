import { describe, expect, it } from 'vitest';
import { redactExcerpt } from '../../src/shared/index.js';
import { luhnNumber, prng, written } from '../support/card-numbers.js';

describe('redactExcerpt', () => {
  it('keeps the digits that end a message when nothing was cut (a port, a count)', () => {
    expect(redactExcerpt('connect ECONNREFUSED 127.0.0.1:5432')).toBe('connect ECONNREFUSED 127.0.0.1:5432');
    expect(redactExcerpt('retry after 30')).toBe('retry after 30');
  });

  it('drops a run of digits cut at the edge of a long body, so no part of a number shows', () => {
    const body = `${'x '.repeat(319)}4761730000000043 and more`;
    const excerpt = redactExcerpt(body, [], 160);
    expect(excerpt).not.toMatch(/\d/);
  });

  it('still replaces anything shaped like a card number', () => {
    expect(redactExcerpt('card 4761 7300 0000 0043 refused')).toMatch(/^card \[(card )?number\] refused$/);
    expect(redactExcerpt('order 1234 5678 9012 3 refused')).toBe('order [number] refused');
  });

  it('finds card numbers with any separator, by the Luhn check, before the excerpt is cut', () => {
    expect(redactExcerpt('declined: 4111.1111.1111.1111 (insufficient funds)')).toBe(
      'declined: [card number] (insufficient funds)',
    );
    expect(redactExcerpt('{"detail":"card 5500/0055/5555/5559 blocked"}')).toBe(
      '{"detail":"card [card number] blocked"}',
    );
    const random = prng(7);
    for (let i = 0; i < 500; i++) {
      const number = luhnNumber(13 + (i % 7), random);
      const body = `${'x'.repeat(i % 700)} card ${written(number, random)} refused ${'y'.repeat(i % 50)}`;
      const excerpt = redactExcerpt(body, [], 160);
      // Not the number, nor 4 digits of it in a row.
      expect(excerpt.replace(/[^0-9]/g, ''), JSON.stringify(excerpt)).not.toMatch(/\d{4}/);
    }
  });

  it('masks e-mail addresses, whatever their local part', () => {
    for (const address of ['jane.doe@example.com', "o'hara+bills@mail.example.co.uk", 'a_b%c!d@x.io']) {
      const excerpt = redactExcerpt(`{"title":"Not Found","detail":"no subscriber ${address} here"}`);
      expect(excerpt).not.toContain(address);
      expect(excerpt).not.toMatch(/[^\s]@[^\s]/);
      expect(excerpt).toContain('[e-mail]');
    }
  });
});
