import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { API_KEY, CARD_TOKEN_KEYS } from '../support/fixtures.js';
import { useTestDatabase } from '../support/helpers.js';
import { type CliProcess, runCli, startCli, testQueue, waitFor } from '../support/queue-helpers.js';

// A new operator's first fleet, as a trial ran it (docs/refresh.md, "What the refresh promises"):
// ids enqueued from a file and synced once by `worker --exit-when-idle` on the defaults, then
// REFRESH_MODE=continuous with a budget to spare and a long max age against `cards-sync mock-api`,
// whose wallets change 12 times an hour for 30% of them. The budget went round a handful of
// subscribers, each synced about once a second, while the rest waited out the max age.

const database = useTestDatabase();
const q = testQueue();
const running: CliProcess[] = [];
afterAll(async () => {
  for (const p of running) p.process.kill('SIGKILL');
  await q.cleanup();
});

const SUBSCRIBERS = 1000;

describe('a small fleet with a budget to spare', () => {
  it('spends the budget over the fleet, not round a handful of subscribers', {
    timeout: 180_000,
  }, async () => {
    const mock = startCli(
      ['mock-api', '--port', '0', '--api-key', API_KEY, '--changes', '0.7:0,0.3:12/h'],
      {},
    );
    running.push(mock);
    const url = await waitFor(
      'the mock API',
      async () => /listening on (http:\/\/\S+)/.exec(mock.stdout())?.[1],
    );
    const env = {
      DATABASE_URL: database.url,
      REDIS_URL: inject('redisUrl'),
      QUEUE_PREFIX: q.prefix,
      CARDS_API_BASE_URL: url,
      CARDS_API_KEY: API_KEY,
      CARD_TOKEN_KEYS,
      LOG_LEVEL: 'warn',
    };
    const ids = Array.from({ length: SUBSCRIBERS }, (_, i) => String(i + 1)).join('\n');
    expect((await runCli(['enqueue', '--file', '-'], env, `${ids}\n`)).code).toBe(0);
    expect((await runCli(['worker', '--exit-when-idle'], env)).code).toBe(0);

    const continuous = startCli(['worker'], {
      ...env,
      REFRESH_MODE: 'continuous',
      REFRESH_BUDGET_PER_SEC: '15',
      REFRESH_MAX_AGE: '2h',
    });
    running.push(continuous);
    // Half a minute of the budget once the first window has handed out syncs.
    await waitFor(
      'the first refresh syncs',
      async () =>
        ((
          await database.handle.pool.query<{ n: number }>(
            "select count(*)::int as n from sync_runs where trigger = 'refresh'",
          )
        ).rows[0]?.n ?? 0) > 0 || undefined,
      60_000,
    );
    await sleep(30_000);
    continuous.process.kill('SIGTERM');
    await continuous.done;

    const { rows } = await database.handle.pool.query<{ syncs: number; subscribers: number; most: number }>(
      `select count(*)::int as syncs, count(distinct subscriber_id)::int as subscribers,
          coalesce(max(n), 0)::int as most
        from (select subscriber_id, count(*) over (partition by subscriber_id) as n
          from sync_runs where trigger = 'refresh') r`,
    );
    const r = rows[0]!;
    // About 15 a second for half a minute; the trial's: 668 syncs over 30 subscribers in a minute.
    expect(r.syncs).toBeGreaterThan(200);
    // Nine syncs in ten to a subscriber not synced before in the half minute; the busiest, a wallet
    // seen changing within seconds, at most every 5 s or so (its plan asks every 10-15 s; the
    // budget left over comes round to the longest waiting). Before: 436 syncs over 324 subscribers,
    // the busiest synced 24 times, about once a second.
    expect(r.subscribers).toBeGreaterThan(0.9 * r.syncs);
    expect(r.most).toBeLessThanOrEqual(6);

    // What the operator reads of it: where the budget goes.
    const status = await runCli(['status'], { ...env, REFRESH_MAX_AGE: '2h' });
    expect(status.stdout).toMatch(
      /budget: \d+\.\d\d% to the plan \(each subscriber by its rate, the max age\), \d+\.\d\d% to coverage.*, 2\.00% to the audit/,
    );
  });
});
