import { describe, expect, it } from 'vitest';
import { parseDuration } from '../../src/cli/refresh.js';
import { formatResult } from '../../src/cli/sync.js';
import { CliError } from '../../src/shared/index.js';

// What a person types and reads: durations for --stale, and the one-line outcome of `sync`.

describe('--stale durations', () => {
  it.each([
    ['36h', 36 * 3_600_000],
    ['1.5d', 36 * 3_600_000],
    ['90m', 5_400_000],
    ['2w', 14 * 86_400_000],
    [' 7d ', 7 * 86_400_000],
  ])('accepts %j', (raw, ms) => {
    expect(parseDuration(raw)).toBe(ms);
  });

  it.each(['36', '1.5.5d', '3x', '-1d', '0h', '0.0001s', '1,5d', 'h', '36H', '2M'])(
    'refuses %j with exit 2',
    (raw) => {
      let error: unknown;
      try {
        parseDuration(raw);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(CliError);
      expect((error as CliError).exitCode).toBe(2);
      expect((error as CliError).message).toContain('--stale');
      if (!['0h', '0.0001s'].includes(raw))
        expect((error as CliError).message).toContain('lower-case s, m, h, d or w');
    },
  );
});

describe('the outcome line of sync', () => {
  const result = (cardsSeen: number) => ({
    status: 'succeeded' as const,
    subscriberId: 7,
    syncRunId: 3,
    counts: { cardsSeen, inserted: cardsSeen, updated: 0, unchanged: 0, removed: 0, restored: 0 },
    retryable: false,
    durationMs: 12,
    api: { code: '200', durationMs: 5 },
  });

  it('says "1 card seen", and "2 cards seen"', () => {
    expect(formatResult(result(1), { subscriberId: 7 })).toContain('subscriber 7: 1 card seen;');
    expect(formatResult(result(2), { subscriberId: 7 })).toContain('subscriber 7: 2 cards seen;');
    expect(formatResult(result(0), { subscriberId: 7 })).toContain('subscriber 7: 0 cards seen;');
  });
});
