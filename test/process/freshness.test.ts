import { sql } from 'drizzle-orm';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { readFreshness } from '../../db/refresh/freshness.js';
import { policyCache, readPolicy, savePolicy } from '../../db/refresh/policy.js';
import { replanAndPullIn } from '../../jobs/refresh/continuous.js';
import { replan } from '../../jobs/refresh/policy.js';
import {
  estimatedStaleShare,
  estimateRate,
  MOST_SYNCS_OF_MEAN,
  MS_PER_DAY,
  PLANNED_SHARE,
  policyParams,
  STALE_MODEL,
  staleEstimate,
  staleProbability,
  staleRateOf,
  wilson,
} from '../../src/freshness/index.js';
import { adminFor } from '../support/admin-helpers.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';
import { runCli, testQueue } from '../support/queue-helpers.js';

/** The refresh settings the plan tests make their plans under: continuous, 1/s, a week's max age. */
const CONTINUOUS = {
  mode: 'continuous' as const,
  budgetPerSec: 1,
  maxAgeMs: 7 * MS_PER_DAY,
  auditShare: 0.02,
};

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

  it('the plan fits the population mixture once 50 subscribers have observations; workers read it, and refuse a malformed one', async () => {
    // 70 quiet wallets (a week unchanged, twice), 30 busy ones (changed in each of three days).
    await pool().query(
      `insert into subscribers (subscriber_id, last_success_at, change_observations)
        select g, now(), case when g <= 70 then array[7, 7]::real[] else array[-1, -1, -1]::real[] end
        from generate_series(1, 100) g`,
    );
    const settings = CONTINUOUS;
    const plan = await replan(pool(), settings);
    expect(plan.priorMixture).not.toBeNull();
    const stored = await readPolicy(pool());
    expect(stored?.priorMixture).toEqual(plan.priorMixture);
    const params = policyParams(stored, 7 * MS_PER_DAY);
    expect(params.prior.mixture).toEqual(plan.priorMixture);
    const busy = estimateRate([-1, -1, -1], params.prior);
    const quiet = estimateRate([14], params.prior);
    expect(busy).toBeGreaterThan(1);
    expect(quiet).toBeLessThan(0.05);
    // A row that is not a mixture is read as none: the single prior rate serves.
    await pool().query(`update refresh_policy set prior_mixture = '{"ratesPerDay": [1], "weights": "x"}'`);
    expect((await readPolicy(pool()))?.priorMixture).toBeNull();
    expect(policyParams(await readPolicy(pool()), 7 * MS_PER_DAY).prior.mixture).toBeNull();
    // The threshold is solved on each subscriber's estimate under this plan's prior (at the
    // intervals of the plan in force): the rates the last syncs stored (under older priors) do not
    // move it.
    const inForce = stored!;
    const again = await replan(pool(), settings, undefined, inForce);
    await pool().query('update subscribers set change_rate_per_day = 1000, stale_rate_per_day = 1000');
    expect((await replan(pool(), settings, undefined, inForce)).thresholdDays).toBeCloseTo(
      again.thresholdDays!,
      9,
    );
    // Fewer than 50 observed: no mixture is fitted.
    await pool().query('update subscribers set change_observations = null where subscriber_id > 40');
    expect((await replan(pool(), settings)).priorMixture).toBeNull();
  });

  it('the first plan with a mixture stores a stale rate for each subscriber synced before it; a rate a sync stored is kept', async () => {
    // As the test above: 70 quiet, 30 busy, all synced before any plan; 101 synced once, no
    // observation; 5 since synced under a mixture (its own stale rate).
    await pool().query(
      `insert into subscribers (subscriber_id, last_success_at, change_observations)
        select g, now(), case when g <= 70 then array[7, 7]::real[] else array[-1, -1, -1]::real[] end
        from generate_series(1, 100) g`,
    );
    await pool().query(`insert into subscribers (subscriber_id, last_success_at) values (101, now())`);
    await pool().query('update subscribers set stale_rate_per_day = 0.123 where subscriber_id = 5');
    const { logger, lines } = captureLogger('info');
    const deps = { pool: pool(), claims: pool(), logger };
    const plan = await replanAndPullIn(deps, undefined, CONTINUOUS);
    expect(plan.priorMixture).not.toBeNull();
    const params = policyParams(plan, CONTINUOUS.maxAgeMs);
    const read = async () =>
      (
        await pool().query<{ id: number; observations: number[] | null; rate: number | null }>(
          `select subscriber_id as id, change_observations as observations, stale_rate_per_day as rate
            from subscribers order by subscriber_id`,
        )
      ).rows;
    const rows = await read();
    // What a sync of the same wallet (no card listed) would store under this plan.
    const noCard = { newestCardAgeDays: null, cards: 0 };
    for (const r of rows.filter((r) => r.id !== 5 && r.id !== 101))
      expect(r.rate, String(r.id)).toBeCloseTo(staleRateOf(r.observations, noCard, params)!, 12);
    // A quiet wallet's chance of a change is far below a busy one's.
    expect(rows[0]!.rate!).toBeLessThan(rows[99]!.rate! / 10);
    expect(rows.find((r) => r.id === 5)!.rate).toBe(0.123);
    expect(rows.find((r) => r.id === 101)!.rate).toBeNull();
    expect(lines.some((l) => l.includes('stale rates stored for the subscribers synced before it'))).toBe(
      true,
    );
    // A plan after one with a mixture reads nothing of the kind; one after a plan without (a refit
    // from the audit) does.
    await pool().query('update subscribers set stale_rate_per_day = null where subscriber_id = 1');
    expect((await replanAndPullIn(deps, plan, CONTINUOUS)).priorMixture).not.toBeNull();
    expect((await read())[0]!.rate).toBeNull();
    await replanAndPullIn(deps, { ...plan, priorMixture: null }, CONTINUOUS);
    expect((await read())[0]!.rate).toBeCloseTo(rows[0]!.rate!, 12);
  });

  it('a worker that found no plan reads it again within a second; once it has one, at its usual pace', async () => {
    const settings = CONTINUOUS;
    const cache = policyCache(pool(), 7 * MS_PER_DAY, {
      params: policyParams,
      detached: (fn) => fn(),
      ttlMs: 60_000,
    });
    await cache.load();
    expect(cache.get().thresholdDays).toBe(Number.POSITIVE_INFINITY);
    await pool().query(
      `insert into subscribers (subscriber_id, last_success_at, change_observations)
        select g, now(), array[7]::real[] from generate_series(1, 10) g`,
    );
    const plan = await replan(pool(), settings);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    cache.get();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(cache.get().thresholdDays).toBeCloseTo(plan.thresholdDays!, 9);
    // With a plan read, the next read waits for the ttl (a minute here).
    await replan(pool(), { ...settings, budgetPerSec: 0.5 });
    await new Promise((resolve) => setTimeout(resolve, 1100));
    cache.get();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(cache.get().thresholdDays).toBeCloseTo(plan.thresholdDays!, 9);
  });

  it("the next plan goes round in turn when the plan's own syncs found far more changed than it expected; first syncs and the audit's draws are not its syncs", async () => {
    // 100 subscribers synced an hour ago, each observed quiet for a day: the rates say little changes.
    await pool().query(
      `insert into subscribers (subscriber_id, last_success_at, change_observations)
        select g, now() - interval '1 hour', array[1]::real[] from generate_series(1, 100) g`,
    );
    const settings = CONTINUOUS;
    const first = await replan(pool(), settings);
    expect(first.auditAction).toBe('none');
    expect(first.expectedChangedShare).toBeGreaterThanOrEqual(0);
    expect(first.expectedChangedShare).toBeLessThan(0.3);
    const stored = (await readPolicy(pool()))!;
    expect(stored.expectedChangedShare).toBeCloseTo(first.expectedChangedShare!, 12);
    const since = async (rows: string) =>
      pool().query(
        `insert into sync_runs (subscriber_id, trigger, started_at, finished_at, status, cards_seen, inserted, updated, removed, unchanged)
          select g, ${rows} from generate_series(1, 60) g`,
      );
    // 60 first syncs (every card inserted, nothing stored before), all "changed", and 60 audit draws
    // that found nothing (the audit agrees with the estimate): neither is the plan's own.
    await since(`'refresh', now() + interval '1 second', now(), 'succeeded', 2, 2, 0, 0, 0`);
    await since(`'audit', now() + interval '1 second', now(), 'succeeded', 2, 0, 0, 0, 2`);
    expect((await replan(pool(), settings, undefined, stored)).auditAction).toBe('none');
    // 60 of the plan's syncs, every token reissued (one card removed, one inserted): far more than it expected.
    await since(`'refresh', now() + interval '1 second', now(), 'succeeded', 1, 1, 0, 1, 0`);
    // Each planned a minute after its last sync, as the rates of a busy wallet would plan it.
    await pool().query(`update subscribers set next_refresh_at = last_success_at + interval '1 minute'`);
    await pool().query(
      'update subscriber_schedule q set due_at = s.next_refresh_at from subscribers s where s.subscriber_id = q.subscriber_id',
    );
    const { logger, lines } = captureLogger('info');
    const round = await replanAndPullIn({ pool: pool(), claims: pool(), logger }, stored, settings);
    expect(round.auditAction).toBe('round-robin');
    expect(round.syncsMissed).toBe(true);
    // Going round in turn, each is due at its last sync plus the round: the claim takes them in the
    // order they were last synced (test/integration/continuous-refresh.test.ts has the claim).
    const { rows } = await pool().query<{ due: number }>(
      `select distinct round(extract(epoch from q.due_at - s.last_success_at))::int as due
        from subscribers s join subscriber_schedule q using (subscriber_id)`,
    );
    const roundSeconds = Math.round(round.coverageDays! * 86_400);
    expect(roundSeconds).toBeGreaterThan(60);
    expect(rows).toEqual([{ due: roundSeconds }]);
    expect(lines.some((l) => l.includes('due times planned sooner than the round put back to it'))).toBe(
      true,
    );
    // A plan stored by an earlier release expected nothing: its syncs are held to nothing.
    expect(
      (await replan(pool(), settings, undefined, { ...stored, expectedChangedShare: null })).auditAction,
    ).toBe('none');
  });

  it("the audit's draws made under plans of another kind than those in force are not held against the estimate", async () => {
    // 100 subscribers synced an hour ago, each observed quiet for a day: the estimate is low.
    await pool().query(
      `insert into subscribers (subscriber_id, last_success_at, change_observations)
        select g, now() - interval '1 hour', array[1]::real[] from generate_series(1, 100) g`,
    );
    expect((await replan(pool(), CONTINUOUS)).auditAction).toBe('none');
    const stored = (await readPolicy(pool()))!;
    // 60 audit draws two hours ago, every one found changed: under a plan that went round in turn,
    // say, in a fleet far staler then than the plans in force keep it.
    await pool().query(
      `insert into sync_runs (subscriber_id, trigger, started_at, finished_at, status, cards_seen, inserted, updated, removed, unchanged)
        select g, 'audit', now() - interval '2 hours', now() - interval '2 hours', 'succeeded', 1, 0, 1, 0, 0
        from generate_series(1, 60) g`,
    );
    const hoursAgo = (h: number) => new Date(Date.now() - h * 3_600_000);
    // The plans in force began to expect what they expect an hour ago: the draws are not theirs.
    const since = (h: number) => ({ ...stored, computedAt: hoursAgo(1), expectedSince: hoursAgo(h) });
    expect((await replan(pool(), CONTINUOUS, undefined, since(1))).auditAction).toBe('none');
    // Three hours ago: they are, and the audit finds far more changed than the estimate says.
    expect((await replan(pool(), CONTINUOUS, undefined, since(3))).auditAction).toBe('round-robin');
  });

  it("a budget of a few syncs a plan: the plans' own syncs count together while they expect about the same, and a plan that went round in turn begins anew", async () => {
    // 100 subscribers synced an hour ago, each observed quiet for a day: the rates say little changes.
    await pool().query(
      `insert into subscribers (subscriber_id, last_success_at, change_observations)
        select g, now() - interval '1 hour', array[1]::real[] from generate_series(1, 100) g`,
    );
    const syncs = async (from: number, to: number) =>
      pool().query(
        `insert into sync_runs (subscriber_id, trigger, started_at, finished_at, status, cards_seen, inserted, updated, removed, unchanged)
          select g, 'refresh', clock_timestamp(), clock_timestamp(), 'succeeded', 1, 1, 0, 1, 0
          from generate_series($1::int, $2::int) g`,
        [from, to],
      );
    await replan(pool(), CONTINUOUS);
    const first = (await readPolicy(pool()))!;
    expect(first.expectedSince.getTime()).toBe(first.computedAt.getTime());
    // The plan's shortest interval, which the workers read: the scheduled budget's mean interval
    // over ten (1/s less the audit's 2%, of which the plan schedules PLANNED_SHARE, over 100).
    const meanDays = 100 / (86_400 * (1 - CONTINUOUS.auditShare) * PLANNED_SHARE);
    expect(first.minIntervalDays).toBeCloseTo(meanDays / MOST_SYNCS_OF_MEAN, 9);
    expect(policyParams(first, CONTINUOUS.maxAgeMs).minIntervalDays).toBe(first.minIntervalDays);
    // 20 syncs under the first plan, every token reissued: too few to judge, so the next plan,
    // expecting what it did, carries its expectation on.
    await syncs(1, 20);
    expect((await replan(pool(), CONTINUOUS, undefined, first)).auditAction).toBe('none');
    const second = (await readPolicy(pool()))!;
    expect(second.computedAt.getTime()).toBeGreaterThan(first.computedAt.getTime());
    expect(second.expectedSince.getTime()).toBe(first.computedAt.getTime());
    expect(second.expectedFrom).toBe(first.expectedChangedShare);
    // 20 more under the second plan: 40 since the expectation began, where the second plan alone
    // has 20. Together they are far more than it expected, and the next plan goes round in turn.
    await syncs(21, 40);
    expect((await replan(pool(), CONTINUOUS, undefined, second)).auditAction).toBe('round-robin');
    const third = (await readPolicy(pool()))!;
    // A plan that goes round in turn begins its own expectation, and so does the one after it: the
    // syncs it acted on are not judged again.
    expect(third.expectedSince.getTime()).toBe(third.computedAt.getTime());
    expect((await replan(pool(), CONTINUOUS, undefined, third)).auditAction).toBe('none');
    const fourth = (await readPolicy(pool()))!;
    expect(fourth.expectedSince.getTime()).toBe(fourth.computedAt.getTime());
    expect(fourth.minIntervalDays).toBeGreaterThan(0);
    // An earlier release makes the next plan (a rolling upgrade): it writes the row without the
    // columns it does not know, which stay as they were. They are read as unknown, not as its plan's.
    await pool().query(
      `update refresh_policy set computed_at = now() + interval '1 second', audit_action = 'none' where id = 1`,
    );
    await pool().query(`update refresh_policy set expected_changed_share = 0.5 where id = 1`);
    const earlier = (await readPolicy(pool()))!;
    expect(earlier.expectedSince.getTime()).toBe(earlier.computedAt.getTime());
    expect(earlier.expectedFrom).toBe(0.5);
    expect(earlier.minIntervalDays).toBeNull();
    expect(policyParams(earlier, CONTINUOUS.maxAgeMs).minIntervalDays).toBe(0);
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
