import type pg from 'pg';

// `refresh_policy`: the one row of the refresh's shared plan. What the plan means is the policy's
// (src/freshness): its callers turn the stored row into the policy's parameters
// (src/freshness/schedule.ts `policyParams`).

/**
 * The population's prior as stored in `prior_mixture` (the shape of src/freshness/mixture.ts
 * `RateMixture`): a grid of rates, ascending, and the prior's weight at each; per evidence group,
 * weights on the same grid.
 */
interface StoredMixture {
  ratesPerDay: number[];
  weights: number[];
  groups?: Record<string, number[]>;
}

export interface StoredPolicy {
  mode: string;
  thresholdDays: number | null;
  priorRatePerDay: number;
  /** Null until enough subscribers are observed; the single rate serves until then. */
  priorMixture: StoredMixture | null;
  maxAgeSeconds: number;
  budgetPerSec: number | null;
  auditShare: number;
  subscribers: number;
  keepsMaxAge: boolean;
  maxAgeNeedsPerSec: number;
  /** The longest interval the plan gives anyone, days, when coverage shortens it; null otherwise. */
  coverageDays: number | null;
  /** Shares of the schedule's budget for the plan and for coverage; null in a plan stored before them. */
  spend: { plan: number; coverage: number } | null;
  /**
   * How the plan acts on the audit: `none`; `round-robin` while the audit finds more changed than the
   * estimate (or the plan's own syncs far more than it expected); `estimate-high` while the estimate
   * is above the audit and the stored prior is the audit's refit. Null in a plan stored before it.
   */
  auditAction: string | null;
  /** The share of the plan's own syncs expected to find the cards changed; null in a plan stored before it. */
  expectedChangedShare: number | null;
  /**
   * Since when the plans in force have expected about the same share (src/freshness
   * `expectationSince`); a plan stored before it, or written since by an earlier release, gives its
   * `computedAt`.
   */
  expectedSince: Date;
  /**
   * The share the plans of that expectation began at (src/freshness `Expectation`); a plan stored
   * before it, or written since by an earlier release, gives its `expectedChangedShare`.
   */
  expectedFrom: number | null;
  /**
   * The shortest interval the plan gives a wallet changing at most twice a max age, days
   * (src/freshness `MOST_SYNCS_OF_MEAN`); null in a plan stored before it, or written since by an
   * earlier release.
   */
  minIntervalDays: number | null;
  computedAt: Date;
}

export async function readPolicy(pool: pg.Pool): Promise<StoredPolicy | undefined> {
  const { rows } = await pool.query<{
    mode: string;
    threshold_days: number | null;
    prior_rate_per_day: number;
    prior_mixture: unknown;
    max_age_seconds: number;
    budget_per_sec: number | null;
    audit_share: number;
    subscribers: number;
    keeps_max_age: boolean;
    max_age_needs_per_sec: number;
    coverage_days: number | null;
    spend_plan: number | null;
    spend_coverage: number | null;
    audit_action: string | null;
    expected_changed_share: number | null;
    expected_since: Date | null;
    expected_from: number | null;
    min_interval_days: number | null;
    stamped_at: Date | null;
    computed_at: Date;
  }>('select * from refresh_policy where id = 1');
  const r = rows[0];
  if (!r) return undefined;
  const stamped = r.stamped_at !== null && r.stamped_at.getTime() === r.computed_at.getTime();
  return {
    mode: r.mode,
    thresholdDays: r.threshold_days,
    priorRatePerDay: r.prior_rate_per_day,
    // Written by this code, but read defensively: a mixture that is not one is no mixture.
    priorMixture: isMixture(r.prior_mixture) ? r.prior_mixture : null,
    maxAgeSeconds: r.max_age_seconds,
    budgetPerSec: r.budget_per_sec,
    auditShare: r.audit_share,
    subscribers: r.subscribers,
    keepsMaxAge: r.keeps_max_age,
    maxAgeNeedsPerSec: r.max_age_needs_per_sec,
    coverageDays: r.coverage_days,
    spend:
      r.spend_plan === null || r.spend_coverage === null
        ? null
        : { plan: r.spend_plan, coverage: r.spend_coverage },
    auditAction: r.audit_action,
    expectedChangedShare: r.expected_changed_share,
    // Written with the plan, or left as they were by an earlier release that wrote it since.
    expectedSince: (stamped ? r.expected_since : null) ?? r.computed_at,
    expectedFrom: (stamped ? r.expected_from : null) ?? r.expected_changed_share,
    minIntervalDays: stamped ? r.min_interval_days : null,
    computedAt: r.computed_at,
  };
}

/** A plan to store: what a plan of an earlier release lacked may be left out (stored as null). */
export type PolicyToSave = Omit<
  StoredPolicy,
  | 'computedAt'
  | 'coverageDays'
  | 'spend'
  | 'auditAction'
  | 'expectedChangedShare'
  | 'expectedSince'
  | 'expectedFrom'
  | 'minIntervalDays'
> &
  Partial<
    Pick<
      StoredPolicy,
      'coverageDays' | 'spend' | 'auditAction' | 'expectedChangedShare' | 'expectedFrom' | 'minIntervalDays'
    >
  > & {
    /** Null or left out: since this plan (its `computed_at`). */
    expectedSince?: Date | null;
  };

/** Saves the plan; returns when it was made and since when its expectation held, by the database's clock. */
export async function savePolicy(
  pool: pg.Pool,
  p: PolicyToSave,
): Promise<Pick<StoredPolicy, 'computedAt' | 'expectedSince' | 'expectedFrom'>> {
  const { rows } = await pool.query<{
    computed_at: Date;
    expected_since: Date;
    expected_from: number | null;
  }>(
    `insert into refresh_policy (id, mode, threshold_days, prior_rate_per_day, max_age_seconds, budget_per_sec,
        audit_share, subscribers, keeps_max_age, max_age_needs_per_sec, prior_mixture, coverage_days,
        spend_plan, spend_coverage, audit_action, expected_changed_share, expected_since, expected_from,
        min_interval_days, stamped_at, computed_at)
      values (1, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, coalesce($16, now()), $17,
        $18, now(), now())
      on conflict (id) do update set mode = excluded.mode, threshold_days = excluded.threshold_days,
        prior_rate_per_day = excluded.prior_rate_per_day, prior_mixture = excluded.prior_mixture,
        max_age_seconds = excluded.max_age_seconds,
        budget_per_sec = excluded.budget_per_sec, audit_share = excluded.audit_share,
        subscribers = excluded.subscribers, keeps_max_age = excluded.keeps_max_age,
        max_age_needs_per_sec = excluded.max_age_needs_per_sec, coverage_days = excluded.coverage_days,
        spend_plan = excluded.spend_plan, spend_coverage = excluded.spend_coverage,
        audit_action = excluded.audit_action, expected_changed_share = excluded.expected_changed_share,
        expected_since = excluded.expected_since, expected_from = excluded.expected_from,
        min_interval_days = excluded.min_interval_days, stamped_at = excluded.stamped_at,
        computed_at = excluded.computed_at
      returning computed_at, expected_since, expected_from`,
    [
      p.mode,
      p.thresholdDays,
      p.priorRatePerDay,
      p.maxAgeSeconds,
      p.budgetPerSec,
      p.auditShare,
      p.subscribers,
      p.keepsMaxAge,
      p.maxAgeNeedsPerSec,
      p.priorMixture === null ? null : JSON.stringify(p.priorMixture),
      p.coverageDays ?? null,
      p.spend?.plan ?? null,
      p.spend?.coverage ?? null,
      p.auditAction ?? null,
      p.expectedChangedShare ?? null,
      p.expectedSince ?? null,
      p.expectedFrom ?? null,
      p.minIntervalDays ?? null,
    ],
  );
  const r = rows[0]!;
  return { computedAt: r.computed_at, expectedSince: r.expected_since, expectedFrom: r.expected_from };
}

/**
 * Whether a value read back from `prior_mixture` is a usable mixture: one that is not is none. A
 * check of the stored row, so it lives with the row (the policy only ever makes mixtures).
 */
export function isMixture(value: unknown): value is StoredMixture {
  if (typeof value !== 'object' || value === null) return false;
  const { ratesPerDay, weights } = value as Partial<StoredMixture>;
  return (
    Array.isArray(ratesPerDay) &&
    Array.isArray(weights) &&
    ratesPerDay.length > 0 &&
    ratesPerDay.length === weights.length &&
    ratesPerDay.every((r) => typeof r === 'number' && r > 0 && Number.isFinite(r)) &&
    weights.every((w) => typeof w === 'number' && w >= 0 && Number.isFinite(w)) &&
    validGroups((value as Partial<StoredMixture>).groups, ratesPerDay.length)
  );
}

function validGroups(groups: unknown, k: number): boolean {
  if (groups === undefined) return true;
  if (typeof groups !== 'object' || groups === null) return false;
  return Object.values(groups).every(
    (w) =>
      Array.isArray(w) &&
      w.length === k &&
      w.every((x) => typeof x === 'number' && x >= 0 && Number.isFinite(x)),
  );
}

/** What the cache needs of the policy and of tracing, handed in by its caller. */
export interface PolicyCacheOptions<P> {
  /** The parameters a stored plan (or none yet) gives under `maxAgeMs` (src/freshness `policyParams`). */
  params(stored: StoredPolicy | undefined, maxAgeMs: number): P;
  /** Runs `fn` outside any trace (src/tracing `tracing().detached`). */
  detached(fn: () => Promise<void>): unknown;
  /** Default: every 30 s, or a twentieth of the max age when that is shorter. */
  ttlMs?: number;
}

/**
 * The plan as every worker reads it: fetched at once, then again every `ttlMs` in the background,
 * so a sync never waits for it. A failed read keeps the last plan. By default every 30 s, or a
 * twentieth of the max age when that is shorter (a max age of seconds, in the tests). While no plan
 * is stored, every second: a worker starts before the refresh has made its first plan, and its
 * syncs until then plan everyone at the max age (a first sweep's first 15 s of syncs, at a max
 * age of 5 min, asked next 4.5 min later instead of a minute).
 */
export function policyCache<P>(pool: pg.Pool, maxAgeMs: number, options: PolicyCacheOptions<P>) {
  const { params, detached } = options;
  const ttlMs = options.ttlMs ?? Math.max(200, Math.min(30_000, maxAgeMs / 20));
  const untilPlannedMs = Math.min(ttlMs, 1000);
  let current = params(undefined, maxAgeMs);
  let fetchedAt = 0;
  let planned = false;
  let pending: Promise<void> | undefined;
  const refresh = () => {
    pending ??= readPolicy(pool)
      .then((stored) => {
        current = params(stored, maxAgeMs);
        planned = stored !== undefined;
        fetchedAt = Date.now();
      })
      .catch(() => {})
      .finally(() => {
        pending = undefined;
      });
    return pending;
  };
  return {
    async load() {
      await refresh();
    },
    get(): P {
      // In the background for every caller: not in the trace of the one that found it stale.
      if (Date.now() - fetchedAt > (planned ? ttlMs : untilPlannedMs)) void detached(refresh);
      return current;
    },
  };
}
