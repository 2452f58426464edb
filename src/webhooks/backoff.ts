// When a failed delivery is tried again (docs/webhooks.md: retried with backoff for about a day,
// Retry-After honoured, then dead-lettered). Exponential growth with full jitter (each wait drawn
// uniformly below the current ceiling, as AWS's "Exponential Backoff and Jitter" recommends): a
// receiver that comes back is not hit by every worker's retries at the same instant. The dead
// letter comes from the clock, not from a count: `giveUpAfterMs` after the first attempt, whatever
// the draws were, with one last attempt at that moment.

export interface RetrySchedule {
  /** Ceiling of the first retry's wait; it doubles each attempt. Default 5 s. */
  baseMs: number;
  /** Largest ceiling a wait may reach. Default 6 h. */
  maxDelayMs: number;
  /** Longest `Retry-After` honoured (a longer one is cut to it). Default 6 h. */
  maxRetryAfterMs: number;
  /** Shortest wait, whatever the draw. Default 1 s. */
  minDelayMs: number;
  /** After this long since the first attempt a failure is final: the dead letter. Default 24 h. */
  giveUpAfterMs: number;
  /** An endpoint with no 2xx for this long is disabled. Default 5 days. */
  disableAfterMs: number;
}

export const DEFAULT_SCHEDULE: RetrySchedule = {
  baseMs: 5_000,
  maxDelayMs: 6 * 3_600_000,
  maxRetryAfterMs: 6 * 3_600_000,
  minDelayMs: 1_000,
  giveUpAfterMs: 24 * 3_600_000,
  disableAfterMs: 5 * 86_400_000,
};

export type NextStep = { kind: 'retry'; at: Date } | { kind: 'dead' };

/**
 * What follows failed attempt number `attempt` (1 = the first), made at `now` for a delivery
 * first tried at `firstAttemptAt`. `retryAfterMs` (the receiver's `Retry-After`) is honoured
 * up to `maxRetryAfterMs` and never beyond the dead letter's moment.
 */
export function nextStep(
  o: { attempt: number; firstAttemptAt: Date; now: Date; retryAfterMs: number | null },
  schedule: RetrySchedule = DEFAULT_SCHEDULE,
  random: () => number = Math.random,
): NextStep {
  const deadline = o.firstAttemptAt.getTime() + schedule.giveUpAfterMs;
  const now = o.now.getTime();
  if (now >= deadline) return { kind: 'dead' };
  const wait = retryWaitMs(o.attempt, o.retryAfterMs, schedule, random);
  return { kind: 'retry', at: new Date(Math.min(now + wait, deadline)) };
}

/** The wait after failed attempt `attempt`: a full-jitter draw, or `Retry-After` when longer (capped). */
export function retryWaitMs(
  attempt: number,
  retryAfterMs: number | null,
  schedule: RetrySchedule = DEFAULT_SCHEDULE,
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(schedule.maxDelayMs, schedule.baseMs * 2 ** Math.min(attempt - 1, 40));
  const wait = Math.max(schedule.minDelayMs, Math.floor(random() * ceiling));
  return retryAfterMs === null ? wait : Math.max(wait, Math.min(retryAfterMs, schedule.maxRetryAfterMs));
}
