// The refresh's request budget as a token bucket on a shared clock, and the audit's share of it.
// Pure: the time is passed in (Postgres's clock in production, the simulator's in the bench).

export interface Allowance {
  /** Syncs that may be handed out now. */
  count: number;
  /** The bucket's new mark: `now` less what the fraction left over is worth. */
  markedAt: number;
}

/**
 * Syncs the budget allows between `markedAt` and `now` (ms), at most `burstSeconds` worth of them
 * at once: an idle minute does not turn into a burst of a minute's requests.
 */
export function allowance(
  markedAt: number | null,
  now: number,
  perSecond: number,
  burstSeconds = 2,
): Allowance {
  if (!(perSecond > 0)) return { count: 0, markedAt: now };
  // A budget under one request per burst still accrues: the window holds at least two requests.
  const window = Math.max(burstSeconds, 2 / perSecond) * 1000;
  const from = markedAt === null ? now - 1000 / perSecond : Math.max(markedAt, now - window);
  const count = Math.max(0, Math.floor(((now - from) / 1000) * perSecond));
  return { count, markedAt: from + (count / perSecond) * 1000 };
}

export interface Split {
  /** Chosen by the schedule. */
  scheduled: number;
  /** Drawn uniformly at random: the audit. */
  audit: number;
  /** The fraction of an audit sync owed, carried to the next split. */
  carry: number;
}

/** Splits `count` syncs between the schedule and the audit, `share` of them to the audit on average. */
export function splitForAudit(count: number, share: number, carry: number): Split {
  const owed = carry + count * share;
  const audit = Math.min(count, Math.floor(owed));
  return { scheduled: count - audit, audit, carry: owed - audit };
}

/**
 * How often the continuous refresh makes its plan again, for a max age of `maxAgeMs`: a fifth of it,
 * since the estimates move at the pace of the max age and an older plan lags the learning; at least
 * every 10 minutes, so that the plan's own syncs and the audit's draws since it are read over minutes
 * and not days (jobs/refresh/continuous.ts); and no more often than every 10 seconds.
 */
export function replanEveryMs(maxAgeMs: number): number {
  return Math.min(600_000, Math.max(10_000, maxAgeMs / 5));
}
