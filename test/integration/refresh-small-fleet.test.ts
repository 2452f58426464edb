import { sql } from 'drizzle-orm';
import { afterEach, describe, expect, it } from 'vitest';
import { claimDue, readPolicy } from '../../db/refresh/index.js';
import { replanAndPullIn } from '../../jobs/refresh/continuous.js';
import {
  afterClaim,
  aheadWindow,
  chooseAhead,
  MS_PER_DAY,
  observation,
  policyParams,
} from '../../src/freshness/index.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';

// The first fleet most operators run (docs/refresh.md, "What the refresh promises"): a few thousand
// subscribers enqueued and synced once, then REFRESH_MODE=continuous with a budget to spare
// (REFRESH_BUDGET_PER_SEC=15, REFRESH_MAX_AGE=2h). The first sync of each was made before any
// plan, which put its next sync at the max age; a few have been synced since and have a rate.

const database = useTestDatabase();
const { logger } = captureLogger();
const pool = () => database.handle.pool;
afterEach(async () => {
  await database.handle.db.execute(sql`truncate sync_runs, subscribers, subscriber_schedule, refresh_policy`);
});

const MAX_AGE_MS = 2 * 3_600_000;
const settings = { mode: 'continuous' as const, budgetPerSec: 15, maxAgeMs: MAX_AGE_MS, auditShare: 0.02 };

async function seedTrial() {
  // 2,720 synced once 10 minutes ago, planned (as a plan-less worker did) at 90% of the max age.
  await pool().query(
    `insert into subscribers (subscriber_id, last_success_at, change_rate_per_day, next_refresh_at)
      select g, now() - interval '10 minutes', 1 / 7.0, now() - interval '10 minutes' + interval '108 minutes'
        from generate_series(1, 2720) g`,
  );
  // 160 synced every few minutes since, a third of them found changed: each has a rate of its own.
  const obs = [observation(3 / 1440, true), observation(3 / 1440, false), observation(3 / 1440, false)];
  await pool().query(
    `insert into subscribers (subscriber_id, last_success_at, change_rate_per_day, change_observations, next_refresh_at)
      select g, now() - interval '1 minute', 150, $1::float8[], now() + interval '1 minute'
        from generate_series(2721, 2880) g`,
    [obs],
  );
  await pool().query(
    `update subscriber_schedule q set due_at = s.next_refresh_at from subscribers s where s.subscriber_id = q.subscriber_id`,
  );
}

describe('a small fleet with a budget to spare', () => {
  it('plans the subscribers seen once at the population’s rate at the first plan, so the first minute’s claims reach them', async () => {
    await seedTrial();
    const stored = await replanAndPullIn({ pool: pool(), claims: pool(), logger }, undefined, settings);
    // Planned at what the population tells: within minutes, not at 1 h 48 min.
    const { rows } = await pool().query<{ later: number }>(
      `select count(*)::int as later from subscriber_schedule q join subscribers s using (subscriber_id)
        where s.subscriber_id <= 2720 and q.due_at > now() + interval '30 minutes'`,
    );
    expect(rows[0]!.later).toBe(0);
    // A minute of claims at 15/s: 900 claims, each a different subscriber, most of them seen once.
    const params = policyParams(stored, MAX_AGE_MS);
    const claimed: number[] = [];
    for (let second = 0; second < 60; second++)
      claimed.push(
        ...(await claimDue(pool(), 15, (s, now) => afterClaim(s, now, params), {
          choose: chooseAhead,
          window: aheadWindow,
        })),
      );
    expect(claimed).toHaveLength(900);
    expect(new Set(claimed).size).toBe(900);
    expect(claimed.filter((id) => id <= 2720).length).toBeGreaterThan(700);
  });

  it('says where the budget goes: the plan stores its spend, its coverage and how it acts on the audit', async () => {
    await seedTrial();
    await replanAndPullIn({ pool: pool(), claims: pool(), logger }, undefined, settings);
    const stored = (await readPolicy(pool()))!;
    expect(stored.spend).not.toBeNull();
    expect(stored.spend!.plan + stored.spend!.coverage).toBeCloseTo(1, 6);
    expect(stored.auditAction).toBe('none');
    // No interval the plan gives is longer than its coverage or the max age's margin.
    const longest = stored.coverageDays ?? (0.9 * MAX_AGE_MS) / MS_PER_DAY;
    const { rows } = await pool().query<{ beyond: number }>(
      `select count(*)::int as beyond from subscriber_schedule
        where due_at > now() + make_interval(secs => $1::float8)`,
      [longest * 86_400 + 5],
    );
    expect(rows[0]!.beyond).toBe(0);
  });

  it('acts on an audit that disagrees with the estimate: the plan goes round in turn, everyone at the budget’s interval', async () => {
    await seedTrial();
    // 161 audit syncs of the last max age, 144 found a change (the trial's), where the estimate is low.
    await pool().query(
      `insert into sync_runs (subscriber_id, trigger, started_at, finished_at, status, updated)
        select g, 'audit', now() - interval '5 minutes', now(), 'succeeded', case when g <= 144 then 1 else 0 end
        from generate_series(1, 161) g`,
    );
    await pool().query(
      `update subscribers set change_rate_per_day = 0.001, change_observations = array[1.0]::float8[]`,
    );
    await replanAndPullIn({ pool: pool(), claims: pool(), logger }, undefined, settings);
    const stored = (await readPolicy(pool()))!;
    expect(stored.auditAction).toBe('round-robin');
    // 2,880 subscribers at 14.7/s: each once every 196 s.
    expect(stored.coverageDays! * 86_400).toBeCloseTo(2880 / (15 * 0.98 * 0.9), 0);
  });
});
