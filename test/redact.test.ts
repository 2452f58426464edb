import { describe, expect, it } from 'vitest';
import { redactExcerpt } from '../src/redact.js';

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
    expect(redactExcerpt('card 4761 7300 0000 0043 refused')).toBe('card [number] refused');
  });
});
