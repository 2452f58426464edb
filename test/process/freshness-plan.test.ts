import { sql } from 'drizzle-orm';
import { afterEach, describe, expect, it } from 'vitest';
import { policyCache, readPolicy } from '../../db/refresh/policy.js';
import { replanAndPullIn } from '../../jobs/refresh/continuous.js';
import { replan } from '../../jobs/refresh/policy.js';
import {
  estimateRate,
  MOST_SYNCS_OF_MEAN,
  MS_PER_DAY,
  PLANNED_SHARE,
  policyParams,
  staleRateOf,
} from '../../src/freshness/index.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';

// The refresh's plan against real Postgres: the population's mixture, the stale rates a first
// mixture stores, how the plan judges its own syncs and the audit (test/process/freshness.test.ts
// has the figures the plan is judged by).

/** The refresh settings the plan tests make their plans under: continuous, 1/s, a week's max age. */
const CONTINUOUS = {
  mode: 'continuous' as const,
  budgetPerSec: 1,
  maxAgeMs: 7 * MS_PER_DAY,
  auditShare: 0.02,
};

describe('the plan', () => {
  const database = useTestDatabase();
  afterEach(() => database.handle.db.execute(sql`truncate sync_runs, subscribers, refresh_policy`));
  const pool = () => database.handle.pool;

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
    // order they were last synced (test/integration/refresh-schedule.test.ts has the claim).
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
});
