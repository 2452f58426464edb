import type pg from 'pg';
import { readPolicy } from './policy.js';
import { sampledFrom, subscriberCount } from './schedule.js';

// How stale the copy is (docs/refresh.md): the model's estimate, the audit's measurement, the max age.

export interface Freshness {
  mode: string | null;
  /** The model's expected share of subscribers whose stored cards differ from upstream now. */
  estimatedStaleRatio: number;
  /**
   * What the estimate covers and how sure it is (src/freshness/staleness.ts `StaleEstimate`, less
   * its share; neither layer may import the other, so test/contracts/layers.test.ts holds the two
   * alike): its 95% interval if every rate is right, and the subscribers it covers by what it knows
   * of each.
   */
  estimate: EstimateBasis;
  /** The share found changed among the audit's uniform random re-syncs of the last max age. */
  audit: { samples: number; staleRatio: number | null; low: number | null; high: number | null };
  maxAgeSeconds: number;
  /** Subscribers whose last success is older than REFRESH_MAX_AGE. */
  pastMaxAge: number;
  neverSynced: number;
  /**
   * Whether the max age holds: the budget can sync everyone once per max age and no subscriber is
   * past it (null before the first plan).
   */
  keepsMaxAge: boolean | null;
  /** Whether the refresh budget can sync everyone once per max age (null before the first plan). */
  budgetKeepsMaxAge: boolean | null;
  /** True when the counts come from a sample of the table (above 200,000 subscribers). */
  sampled: boolean;
  /**
   * Where the refresh's budget goes, as the last plan split it (null before the first plan, or one
   * stored by an earlier release): shares of the whole budget for the plan (the threshold and the
   * max age), for coverage (the longest interval shortened) and for the audit; the coverage interval;
   * and how the plan acts on the audit (`round-robin` while the two disagree).
   */
  budget: {
    plan: number;
    coverage: number;
    audit: number;
    coverageSeconds: number | null;
    auditAction: string | null;
  } | null;
}

/** The estimate's interval and coverage; counts scaled to the whole table when sampled. */
interface EstimateBasis {
  low: number;
  high: number;
  covers: number;
  learned: number;
  syncedOnce: number;
  neverSynced: number;
  notUpstream: number;
  fromPopulationRate: number;
}

/** A measured share with its confidence interval. */
interface AuditInterval {
  ratio: number;
  low: number;
  high: number;
}

/** The population a subscriber synced once is counted at (the shape of src/freshness `Population`). */
export interface StoredPopulation {
  ratePerDay: number;
  mixture?: { ratesPerDay: number[]; weights: number[] } | null;
}

/**
 * What the policy computes for the figures (src/freshness `STALE_MODEL`): the audit's interval, and
 * the chance that a copy the population alone describes is stale at an age.
 */
export interface StaleModel {
  interval: (found: number, samples: number) => AuditInterval | null;
  populationStale: (population: StoredPopulation, ageDays: number) => number;
}

/**
 * Reads the freshness figures. The estimate is the mean over subscribers of each copy's chance of
 * being stale (src/freshness/staleness.ts `staleEstimate`, the same sums in SQL, checked against it
 * by test/process/freshness.test.ts): a never-synced one counts as stale; one with observations of
 * its own 1 − e^{−λ·age} at the rate its last sync stored for the estimate (`stale_rate_per_day`,
 * else `change_rate_per_day`); one synced once at the population's, read from its age in
 * logarithmic buckets (a thousand from a second to 27 years, each 2% wide) so that the population's mixture is
 * evaluated in the model's code, not per row. Above 200,000 subscribers it reads a page sample,
 * not the whole table.
 */
export async function readFreshness(
  pool: pg.Pool,
  fallbackMaxAgeMs: number,
  model: StaleModel,
  /**
   * The population a subscriber synced once is counted at, where not the stored plan's: the plan
   * being made judges the audit by the population it has just fitted, as the simulator does.
   */
  population?: StoredPopulation,
): Promise<Freshness> {
  const policy = await readPolicy(pool);
  const maxAgeSeconds = policy?.maxAgeSeconds ?? Math.round(fallbackMaxAgeMs / 1000);
  const counted: StoredPopulation =
    population ??
    (policy
      ? { ratePerDay: policy.priorRatePerDay, mixture: policy.priorMixture }
      : { ratePerDay: 86_400 / maxAgeSeconds });
  const total = await subscriberCount(pool);
  const from = sampledFrom(total, 100_000);
  const [subs, audit] = await Promise.all([
    // One read of the table (or of one sample of its pages): each copy's chance of being stale, p,
    // for those with observations of their own, whose sums give that part of the estimate and its
    // spread; and the copies synced once by their age in days, a bucket's count and mean age.
    pool.query<{
      n: number;
      never: number;
      past: number;
      not_upstream: number;
      learned: number;
      sum_p: number | null;
      var_p: number | null;
      once: { n: number; age_days: number }[];
    }>(
      `with c as materialized (
          select last_success_at, consecutive_not_found, observed, age_days,
            case when last_success_at is not null and observed then 1 - exp(-least(700, rate * age_days)) end as p
          from (
            select last_success_at, consecutive_not_found,
              coalesce(cardinality(change_observations), 0) > 0 as observed,
              coalesce(stale_rate_per_day, change_rate_per_day, $2) as rate,
              greatest(0, extract(epoch from now() - last_success_at)::float8) / 86400 as age_days
            from ${from}) t),
        once as (
          select count(*)::int as n, avg(age_days) as age_days from c
          where last_success_at is not null and not observed
          group by width_bucket(ln(greatest(age_days, 1e-5)), ln(1e-5), ln(1e4), 1000))
        select count(*)::int as n,
          count(*) filter (where last_success_at is null)::int as never,
          count(*) filter (where last_success_at < now() - make_interval(secs => $1))::int as past,
          count(*) filter (where last_success_at is null and consecutive_not_found > 0)::int as not_upstream,
          count(*) filter (where last_success_at is not null and observed)::int as learned,
          sum(p)::float8 as sum_p, sum(p * (1 - p))::float8 as var_p,
          (select coalesce(json_agg(json_build_object('n', n, 'age_days', age_days)), '[]') from once) as once
        from c`,
      [maxAgeSeconds, counted.ratePerDay],
    ),
    pool.query<{ samples: number; changed: number }>(
      `select count(*)::int as samples,
          count(*) filter (where inserted + updated + removed + restored > 0)::int as changed
        from sync_runs
        where trigger = 'audit' and status = 'succeeded' and started_at > now() - make_interval(secs => $1)`,
      [maxAgeSeconds],
    ),
  ]);
  let syncedOnce = 0;
  let onceP = 0;
  let onceVar = 0;
  for (const b of subs.rows[0]!.once) {
    const p = model.populationStale(counted, b.age_days);
    syncedOnce += b.n;
    onceP += b.n * p;
    onceVar += b.n * p * (1 - p);
  }
  const s = subs.rows[0]!;
  const scale = s.n > 0 && from !== 'subscribers' ? total / s.n : 1;
  const a = audit.rows[0]!;
  const audited = model.interval(a.changed, a.samples);
  // As src/freshness/staleness.ts `staleEstimate`: a never-synced subscriber is stale for sure, one
  // never synced that the API does not know is left out.
  const never = s.never - s.not_upstream;
  const covers = s.n - s.not_upstream;
  const share = covers > 0 ? ((s.sum_p ?? 0) + onceP + never) / covers : 0;
  const half = covers > 0 ? (1.96 * Math.sqrt((s.var_p ?? 0) + onceVar)) / covers : 0;
  return {
    mode: policy?.mode ?? null,
    estimatedStaleRatio: share,
    estimate: {
      low: Math.max(0, share - half),
      high: Math.min(1, share + half),
      covers: Math.round(covers * scale),
      learned: Math.round(s.learned * scale),
      syncedOnce: Math.round(syncedOnce * scale),
      neverSynced: Math.round(never * scale),
      notUpstream: Math.round(s.not_upstream * scale),
      fromPopulationRate: covers > 0 ? onceP / covers : 0,
    },
    audit: {
      samples: a.samples,
      staleRatio: audited?.ratio ?? null,
      low: audited?.low ?? null,
      high: audited?.high ?? null,
    },
    maxAgeSeconds,
    pastMaxAge: Math.round(s.past * scale),
    neverSynced: Math.round(s.never * scale),
    keepsMaxAge: policy === undefined ? null : policy.keepsMaxAge && s.past === 0,
    budgetKeepsMaxAge: policy?.keepsMaxAge ?? null,
    sampled: from !== 'subscribers',
    budget:
      policy?.spend && policy.mode === 'continuous'
        ? {
            plan: policy.spend.plan * (1 - policy.auditShare),
            coverage: policy.spend.coverage * (1 - policy.auditShare),
            audit: policy.auditShare,
            coverageSeconds: policy.coverageDays === null ? null : Math.round(policy.coverageDays * 86_400),
            auditAction: policy.auditAction,
          }
        : null,
  };
}

/**
 * The audit's latest draws of the last max age (at most `limit`), each as what it observed: the age
 * of the copy it re-synced (since that subscriber's success before it) and whether the cards had
 * changed. What the plan refits the population's rate from when the estimate is above the audit
 * (src/freshness `refitPrior`). A draw with no earlier success in the span (a first sync) observes
 * no interval and is left out.
 */
export async function auditDraws(
  pool: pg.Pool,
  maxAgeSeconds: number,
  limit: number,
  /**
   * How far back a draw's earlier success is looked for (src/freshness `AUDIT_DRAW_SPAN_MAX_AGES`):
   * each look-up probes the per-subscriber index of every day partition in the span.
   */
  spanSeconds: number,
): Promise<{ ageDays: number; changed: boolean }[]> {
  const { rows } = await pool.query<{ age_days: number; changed: boolean }>(
    `select (extract(epoch from a.started_at - p.finished_at) / 86400)::float8 as age_days,
        (a.inserted + a.updated + a.removed + a.restored > 0) as changed
      from (select subscriber_id, started_at, inserted, updated, removed, restored
          from sync_runs
          where trigger = 'audit' and status = 'succeeded' and started_at > now() - make_interval(secs => $1)
          order by started_at desc limit $2) a
      cross join lateral (
        select finished_at from sync_runs p
        where p.subscriber_id = a.subscriber_id and p.status = 'succeeded' and p.started_at < a.started_at
          and p.finished_at <= a.started_at
          and p.started_at > a.started_at - make_interval(secs => $3)
        order by p.started_at desc limit 1) p`,
    [maxAgeSeconds, limit, spanSeconds],
  );
  return rows.map((r) => ({ ageDays: r.age_days, changed: r.changed }));
}

/** Whether the audit's 95% interval excludes the model's estimate: the model is wrong. */
export function auditDisagrees(f: Freshness): boolean {
  return (
    f.audit.low !== null &&
    f.audit.high !== null &&
    (f.estimatedStaleRatio < f.audit.low || f.estimatedStaleRatio > f.audit.high)
  );
}

/**
 * The refresh's own syncs since `since`, the latest `atMost` of them, first syncs apart: how many,
 * and how many found the cards changed. A first sync has nothing stored to compare with (every card
 * it saw inserted, none unchanged, updated, removed or restored) and is left out: an intake would
 * read as a wallet of changes. Read every AUDIT_CHECK_SECONDS between plans (src/freshness
 * `syncsDisagree`). The ledger has only a BRIN in time order, so `order by … limit` sorts the whole
 * span: the caller's `since` (src/freshness `plansSyncsFrom`) keeps it to about a thousand rows.
 */
export async function plansSyncsSince(
  pool: pg.Pool,
  since: Date,
  atMost: number,
): Promise<{ samples: number; changed: number }> {
  const { rows } = await pool.query<{ samples: number; changed: number }>(
    `select count(*)::int as samples,
        count(*) filter (where changed)::int as changed
      from (select inserted + updated + removed + restored > 0 as changed
        from sync_runs
        where trigger = 'refresh' and status = 'succeeded' and started_at > $1
          and not (inserted > 0 and unchanged + updated + removed + restored = 0)
        order by started_at desc
        limit $2) latest`,
    [since, atMost],
  );
  return rows[0]!;
}

/**
 * The audit's draws since `since` (the plan in force was made then): how many, and how many found
 * the copy changed. The continuous refresh reads it between plans (src/freshness `AUDIT_CHECK_SECONDS`).
 */
export async function auditSince(
  pool: pg.Pool,
  since: Date,
  /** Not before the last this many seconds either, by the database's clock. */
  withinSeconds?: number,
): Promise<{ samples: number; changed: number }> {
  const { rows } = await pool.query<{ samples: number; changed: number }>(
    `select count(*)::int as samples,
        count(*) filter (where inserted + updated + removed + restored > 0)::int as changed
      from sync_runs
      where trigger = 'audit' and status = 'succeeded' and started_at > $1
        and ($2::float8 is null or started_at > now() - make_interval(secs => $2::float8))`,
    [since, withinSeconds ?? null],
  );
  return rows[0]!;
}
