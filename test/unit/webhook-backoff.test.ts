import { describe, expect, it } from 'vitest';
import { DEFAULT_SCHEDULE, nextStep } from '../../src/webhooks/backoff.js';

const t0 = new Date('2026-11-26T00:00:00Z');
const at = (ms: number) => new Date(t0.getTime() + ms);

describe('the retry schedule', () => {
  it('grows exponentially under full jitter, never below the floor nor above the ceiling', () => {
    for (const [attempt, ceiling] of [
      [1, 5_000],
      [2, 10_000],
      [5, 80_000],
      [20, 6 * 3_600_000],
    ] as const) {
      const high = nextStep(
        { attempt, firstAttemptAt: t0, now: t0, retryAfterMs: null },
        DEFAULT_SCHEDULE,
        () => 0.999_999,
      );
      const low = nextStep(
        { attempt, firstAttemptAt: t0, now: t0, retryAfterMs: null },
        DEFAULT_SCHEDULE,
        () => 0,
      );
      expect(high).toEqual({ kind: 'retry', at: at(Math.floor(0.999_999 * ceiling)) });
      expect(low).toEqual({ kind: 'retry', at: at(1_000) });
    }
  });

  it('honours Retry-After up to the largest wait', () => {
    const s = nextStep(
      { attempt: 1, firstAttemptAt: t0, now: t0, retryAfterMs: 120_000 },
      DEFAULT_SCHEDULE,
      () => 0,
    );
    expect(s).toEqual({ kind: 'retry', at: at(120_000) });
    const capped = nextStep(
      { attempt: 1, firstAttemptAt: t0, now: t0, retryAfterMs: 86_400_000 },
      DEFAULT_SCHEDULE,
      () => 0,
    );
    expect(capped).toEqual({ kind: 'retry', at: at(6 * 3_600_000) });
  });

  it('a delivery failing for a day gets one last attempt at the 24th hour, then the dead letter', () => {
    const late = at(23.5 * 3_600_000);
    expect(
      nextStep(
        { attempt: 18, firstAttemptAt: t0, now: late, retryAfterMs: null },
        DEFAULT_SCHEDULE,
        () => 0.9,
      ),
    ).toEqual({
      kind: 'retry',
      at: at(24 * 3_600_000),
    });
    expect(
      nextStep({ attempt: 19, firstAttemptAt: t0, now: at(24 * 3_600_000), retryAfterMs: null }),
    ).toEqual({ kind: 'dead' });
  });

  it('with random draws, the attempts of a day number about 15 to 30 (simulated)', () => {
    let seed = 7;
    const random = () => {
      seed = (seed * 48_271) % 2_147_483_647;
      return seed / 2_147_483_647;
    };
    let now = t0;
    let attempts = 1;
    for (;;) {
      const s = nextStep(
        { attempt: attempts, firstAttemptAt: t0, now, retryAfterMs: null },
        DEFAULT_SCHEDULE,
        random,
      );
      if (s.kind === 'dead') break;
      now = s.at;
      attempts++;
    }
    expect(now.getTime() - t0.getTime()).toBe(24 * 3_600_000);
    expect(attempts).toBeGreaterThanOrEqual(15);
    expect(attempts).toBeLessThanOrEqual(30);
  });
});
