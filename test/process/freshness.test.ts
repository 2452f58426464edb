import { sql } from 'drizzle-orm';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { readFreshness } from '../../db/refresh/freshness.js';
import { readPolicy, savePolicy } from '../../db/refresh/policy.js';
import { replan } from '../../jobs/refresh/policy.js';
import {
  estimatedStaleShare,
  MS_PER_DAY,
  STALE_MODEL,
  staleEstimate,
  staleProbability,
  wilson,
} from '../../src/freshness/index.js';
import { adminFor } from '../support/admin-helpers.js';
import { useTestDatabase } from '../support/helpers.js';
import { runCli, testQueue } from '../support/queue-helpers.js';

describe('the freshness figures', () => {
  const database = useTestDatabase();
  const cleanups: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
    await database.handle.db.execute(sql`truncate sync_runs, subscribers, refresh_policy`);
  });
  const pool = () => database.handle.pool;

  async function seedPopulation() {
    // 40 subscribers: ages and rates spread out, 5 never synced.
    await pool().query(
      `insert into subscribers (subscriber_id, last_success_at, change_rate_per_day)
        select g, case when g <= 5 then null else now() - (g * interval '3 hours') + interval '30 minutes' end,
          case when g % 4 = 0 then null else 0.01 * g end
        from generate_series(1, 40) g`,
    );
    // An audit of 50 re-syncs, 5 of which found changes; and a non-audit run that must not count.
    await pool().query(
      `insert into sync_runs (subscriber_id, trigger, started_at, finished_at, status, updated)
        select g, 'audit', now() - interval '1 hour', now(), 'succeeded', case when g <= 5 then 1 else 0 end
        from generate_series(1, 50) g`,
    );
    await pool().query(
      `insert into sync_runs (subscriber_id, trigger, started_at, finished_at, status, updated)
        values (1, 'refresh', now(), now(), 'succeeded', 3)`,
    );
    await savePolicy(pool(), {
      mode: 'continuous',
      thresholdDays: 0.5,
      priorRatePerDay: 0.2,
      priorMixture: null,
      maxAgeSeconds: 86_400,
      budgetPerSec: 1,
      auditShare: 0.02,
      subscribers: 40,
      keepsMaxAge: true,
      maxAgeNeedsPerSec: 40 / 86_400,
    });
  }

  it("the estimate in SQL is the policy code's, and the audit is counted with its interval", async () => {
    await seedPopulation();
    const f = await readFreshness(pool(), 7 * MS_PER_DAY, STALE_MODEL);
    const { rows } = await pool().query<{ ms: number | null; rate: number | null; now_ms: number }>(
      `select (extract(epoch from last_success_at) * 1000)::float8 as ms, change_rate_per_day as rate,
          (extract(epoch from now()) * 1000)::float8 as now_ms from subscribers`,
    );
    const expected = estimatedStaleShare(
      // No row has an observation of its own: each synced one is at the population's rate, whatever
      // rate its sync stored (one stored under an older plan, or none, says nothing of the wallet).
      rows.map((r) => ({ lastSuccessAt: r.ms, ratePerDay: r.rate, observed: false })),
      rows[0]!.now_ms,
      { ratePerDay: 0.2 },
    );
    expect(f.estimatedStaleRatio).toBeCloseTo(expected, 4);
    // No observation anywhere: every synced one rests on the population's rate.
    expect(f.estimate).toMatchObject({
      covers: 40,
      learned: 0,
      syncedOnce: 35,
      neverSynced: 5,
      notUpstream: 0,
    });
    expect(f.estimate.fromPopulationRate).toBeCloseTo(expected - 5 / 40, 4);
    expect(f.audit).toEqual({ samples: 50, staleRatio: 0.1, ...pick(wilson(5, 50)!) });
    // Older than a day: subscribers 9…40 (3 h × g − 30 min > 24 h).
    expect(f.pastMaxAge).toBe(32);
    expect(f.neverSynced).toBe(5);
    expect(f.maxAgeSeconds).toBe(86_400);
    expect(staleProbability(0.5, 2)).toBeCloseTo(1 - Math.exp(-1), 9);
  });

  it('the estimate says what it covers and how sure it is, in SQL as in the policy code, and leaves out ids not found upstream', async () => {
    await seedPopulation();
    // Subscribers 6…25 have observations of their own, 6…15 a rate stored for the estimate; 3 and 4
    // were enqueued but the API does not know them.
    await pool().query(
      `update subscribers set change_observations = array[-0.5, 0.5]::real[],
          stale_rate_per_day = case when subscriber_id <= 15 then 0.002 * subscriber_id end
        where subscriber_id between 6 and 25`,
    );
    await pool().query(
      `update subscribers set consecutive_not_found = 1, last_status = 'not_found' where subscriber_id in (3, 4)`,
    );
    // The population a subscriber synced once is counted at: its mixture, not its pooled rate.
    const population = {
      ratePerDay: 0.2,
      mixture: { ratesPerDay: [0.001, 0.1, 5], weights: [0.7, 0.25, 0.05] },
    };
    const f = await readFreshness(pool(), 7 * MS_PER_DAY, STALE_MODEL, population);
    const { rows } = await pool().query<{
      ms: number | null;
      rate: number | null;
      stale_rate: number | null;
      observed: boolean;
      gone: boolean;
      now_ms: number;
    }>(
      `select (extract(epoch from last_success_at) * 1000)::float8 as ms, change_rate_per_day as rate,
          stale_rate_per_day as stale_rate,
          change_observations is not null as observed, consecutive_not_found > 0 as gone,
          (extract(epoch from now()) * 1000)::float8 as now_ms from subscribers`,
    );
    const expected = staleEstimate(
      rows.map((r) => ({
        lastSuccessAt: r.ms,
        ratePerDay: r.rate,
        staleRatePerDay: r.stale_rate,
        observed: r.observed,
        notUpstream: r.gone,
      })),
      rows[0]!.now_ms,
      population,
    );
    expect(expected).toMatchObject({
      covers: 38,
      learned: 20,
      syncedOnce: 15,
      neverSynced: 3,
      notUpstream: 2,
    });
    expect(f.estimatedStaleRatio).toBeCloseTo(expected.share, 4);
    // Both matter: at the stored mean rates and the pooled rate, as before, it reads otherwise.
    const before = staleEstimate(
      rows.map((r) => ({
        lastSuccessAt: r.ms,
        ratePerDay: r.rate,
        observed: r.observed,
        notUpstream: r.gone,
      })),
      rows[0]!.now_ms,
      { ratePerDay: 0.2 },
    );
    expect(Math.abs(before.share - expected.share)).toBeGreaterThan(0.02);
    expect(f.estimate.low).toBeCloseTo(expected.low, 4);
    expect(f.estimate.high).toBeCloseTo(expected.high, 4);
    expect(f.estimate.fromPopulationRate).toBeCloseTo(expected.fromPopulationRate, 4);
    const { share, low, high, fromPopulationRate, ...counts } = expected;
    expect(f.estimate).toMatchObject(counts);
    // The 3 never synced are stale for sure: the share is at least theirs, and the interval holds it.
    expect(share).toBeGreaterThan(3 / 38);
    expect(low).toBeLessThan(share);
    expect(high).toBeGreaterThan(share);
    expect(fromPopulationRate).toBeGreaterThan(0);
    // `status` says it in words.
    const q = testQueue();
    cleanups.push(q.cleanup);
    const env = { REDIS_URL: inject('redisUrl'), QUEUE_PREFIX: q.prefix, DATABASE_URL: database.url };
    const { stdout } = await runCli(['status'], env);
    expect(stdout).toContain('it covers 38 subscribers: 20 by their own syncs, 15 synced once');
    expect(stdout).toContain(
      '3 never synced (stale for sure); 2 never synced and not found upstream are left out',
    );
  });

  it('before any plan is stored, status, /metrics and the ops page judge the max age by REFRESH_MAX_AGE alike', async () => {
    // 35 synced 3 to 120 hours ago; no plan yet (a fleet just switched on, or nightly mode).
    await pool().query(
      `insert into subscribers (subscriber_id, last_success_at)
        select g, now() - (g * interval '3 hours') + interval '30 minutes' from generate_series(6, 40) g`,
    );
    const q = testQueue();
    cleanups.push(q.cleanup);
    const env = { REDIS_URL: inject('redisUrl'), QUEUE_PREFIX: q.prefix, DATABASE_URL: database.url };
    const json = JSON.parse((await runCli(['status', '--json'], { ...env, REFRESH_MAX_AGE: '1d' })).stdout);
    expect(json.freshness).toMatchObject({ maxAgeSeconds: 86_400, pastMaxAge: 32 });
    const get = adminFor(database, q, cleanups, { refreshMaxAgeMs: MS_PER_DAY });
    expect(await get('/metrics')).toMatch(/^cards_sync_subscribers_past_max_age 32$/m);
    expect(await get('/admin')).toMatch(/32 past the max age of 1d\./);
  });

  it('status --json has freshness; status says it in words; /metrics carries the gauges; the plan says whether the max age holds', async () => {
    await seedPopulation();
    const q = testQueue();
    cleanups.push(q.cleanup);
    const env = { REDIS_URL: inject('redisUrl'), QUEUE_PREFIX: q.prefix, DATABASE_URL: database.url };
    const json = JSON.parse((await runCli(['status', '--json'], env)).stdout);
    expect(json.freshness).toMatchObject({
      mode: 'continuous',
      audit: { samples: 50, staleRatio: 0.1 },
      maxAgeSeconds: 86_400,
      pastMaxAge: 32,
      // The budget would keep it, but 32 subscribers are past it: the max age does not hold.
      keepsMaxAge: false,
      budgetKeepsMaxAge: true,
    });
    expect(json.freshness.estimatedStaleRatio).toBeGreaterThan(0);
    expect(json.freshness.estimate).toMatchObject({ covers: 40, learned: 0, syncedOnce: 35, neverSynced: 5 });
    expect(json.freshness.estimate.low).toBeLessThan(json.freshness.estimatedStaleRatio);
    expect(json.freshness.estimate.high).toBeGreaterThan(json.freshness.estimatedStaleRatio);
    const text = (await runCli(['status'], env)).stdout;
    expect(text).toMatch(
      /freshness \(continuous\): estimated stale \d+\.\d\d% of subscribers; audit 10\.00% found changed/,
    );
    expect(text).toMatch(/max age 1d: 32 subscribers past it, 5 never synced/);
    expect(text).toMatch(
      /MAX AGE NOT KEPT: 32 subscribers past REFRESH_MAX_AGE although the budget suffices/,
    );
    expect(text).not.toMatch(/CANNOT KEEP MAX AGE/);
    const get = adminFor(database, q, cleanups);
    const metrics = await get('/metrics');
    expect(metrics).toMatch(/^cards_sync_audit_stale_ratio 0\.1$/m);
    expect(metrics).toMatch(/^cards_sync_audit_samples 50$/m);
    expect(metrics).toMatch(/^cards_sync_estimate_subscribers\{basis="never_synced"\} 5$/m);
    expect(metrics).toMatch(/^cards_sync_estimate_subscribers\{basis="synced_once"\} 35$/m);
    expect(metrics).toMatch(/^cards_sync_estimated_stale_ratio_high 0\.\d+/m);
    expect(metrics).toMatch(/^cards_sync_subscribers_past_max_age 32$/m);
    expect(metrics).toMatch(/^cards_sync_estimated_stale_ratio 0\.\d+$/m);
    expect(metrics).toMatch(/^cards_sync_audit_stale_ratio_low 0\.0\d+$/m);
    const overview = await get('/admin');
    expect(overview).toMatch(/Estimated stale now: <b>\d+\.\d\d%<\/b>/);
    expect(overview).toContain('id="audit-stale">10.00%');
    expect(overview).toContain(
      '<p class="alert" id="max-age-unkept">32 subscribers are past REFRESH_MAX_AGE.</p>',
    );

    // A budget too small for the max age: the plan says so, and status shouts it.
    const plan = await replan(pool(), {
      mode: 'continuous',
      budgetPerSec: 0.0001,
      maxAgeMs: MS_PER_DAY,
      auditShare: 0.02,
    });
    expect(plan.keepsMaxAge).toBe(false);
    // The audit (10% found changed) disagrees with the estimate: the rates are not trusted, everyone
    // goes round in turn, and no longest wait beyond the max age is named.
    expect(plan.auditAction).toBe('round-robin');
    const cannot = (await runCli(['status'], env)).stdout;
    expect(cannot).toMatch(/CANNOT KEEP MAX AGE/);
    expect(cannot).not.toMatch(/Until then/);
  });

  it("an estimate above the audit: the plan refits the population's rate from the audit's own draws, and status says so", async () => {
    // 40 subscribers synced once, 3 to 120 hours ago, no observation of their own: the population's
    // rate pooled from the sample (none seen: one change per max age) counts most of them stale.
    await pool().query(
      `insert into subscribers (subscriber_id, last_success_at)
        select g, now() - (g * interval '3 hours') from generate_series(1, 40) g`,
    );
    // The audit's 50 draws, each 5 hours after its subscriber's success before it; 5 found a change.
    await pool().query(
      `insert into sync_runs (subscriber_id, trigger, started_at, finished_at, status, updated)
        select g, 'refresh', now() - interval '6 hours', now() - interval '6 hours', 'succeeded', 0
          from generate_series(1, 50) g
        union all
        select g, 'audit', now() - interval '1 hour', now() - interval '1 hour', 'succeeded', case when g <= 5 then 1 else 0 end
          from generate_series(1, 50) g`,
    );
    const settings = { mode: 'continuous' as const, budgetPerSec: 1, maxAgeMs: MS_PER_DAY, auditShare: 0.02 };
    const plan = await replan(pool(), settings);
    expect(plan.auditAction).toBe('estimate-high');
    // 1 − e^{−λ·5h} = 10%: the rate the audit's draws give, no mixture.
    expect(plan.priorRatePerDay).toBeCloseTo(-Math.log(0.9) / (5 / 24), 3);
    expect(plan.priorMixture).toBeNull();
    // Judged against the sampled rate (one change a day), the estimate was far above the audit.
    expect(plan.estimatedStaleRatio!).toBeGreaterThan(0.5);
    const stored = await readPolicy(pool());
    expect(stored).toMatchObject({ auditAction: 'estimate-high', priorMixture: null });
    // Read at the refitted rate (half a change a day, where the sample said one), the estimate comes down.
    const f = await readFreshness(pool(), MS_PER_DAY, STALE_MODEL);
    expect(f.estimatedStaleRatio).toBeLessThan(plan.estimatedStaleRatio! - 0.1);
    const q = testQueue();
    cleanups.push(q.cleanup);
    const env = { REDIS_URL: inject('redisUrl'), QUEUE_PREFIX: q.prefix, DATABASE_URL: database.url };
    const text = (await runCli(['status'], env)).stdout;
    expect(text).toMatch(
      /MODEL DISAGREES, ACTED ON: the estimate was above what the audit finds .*fitted from the audit's own uniform draws/,
    );
    // Draws whose subscriber had no success before them say nothing of a rate: with fewer than 30
    // left to refit from, the plan goes round in turn, as before.
    await pool().query(`delete from sync_runs where trigger = 'refresh' and subscriber_id > 20`);
    expect((await replan(pool(), settings)).auditAction).toBe('round-robin');
  });

  it('where the budget cannot keep the max age, the quiet wait longer and status says how long', async () => {
    // 40 subscribers synced 3 to 120 hours ago, no audit draw yet; 0.0001 syncs a second cannot go
    // round them once a day.
    await pool().query(
      `insert into subscribers (subscriber_id, last_success_at)
        select g, now() - (g * interval '3 hours') from generate_series(1, 40) g`,
    );
    const plan = await replan(pool(), {
      mode: 'continuous',
      budgetPerSec: 0.0001,
      maxAgeMs: MS_PER_DAY,
      auditShare: 0.02,
    });
    expect(plan).toMatchObject({ keepsMaxAge: false, auditAction: 'none' });
    // 1.5 of the budget's rounds (STRETCH_CYCLES): 40 subscribers at 0.0001/s less the audit and the
    // scheduler's margin (7.6 syncs a day) go round in 5.3 days; the longest wait is 7.9 days.
    expect(plan.coverageDays).toBeCloseTo((1.5 * 40) / (0.0001 * 86_400 * 0.98 * 0.9), 1);
    const q = testQueue();
    cleanups.push(q.cleanup);
    const env = { REDIS_URL: inject('redisUrl'), QUEUE_PREFIX: q.prefix, DATABASE_URL: database.url };
    const text = (await runCli(['status'], { ...env, REFRESH_MAX_AGE: '1d' })).stdout;
    expect(text).toMatch(
      /CANNOT KEEP MAX AGE: .*Until then a wallet that never changes waits up to 7\.9d, and the budget that frees goes to those that change, by their rates/,
    );
    expect(text).toMatch(/nobody waits longer than 7\.9d/);
  });
});

function pick(w: { low: number; high: number }) {
  return { low: w.low, high: w.high };
}
