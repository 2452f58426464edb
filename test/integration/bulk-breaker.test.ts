import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  createRefreshQueue,
  queueStatusOf,
  refreshBacklog,
  resumeProcessing,
} from '../../jobs/refresh/index.js';
import { enqueueSyncs, heldCount, readBulkPause, startSyncWorker } from '../../jobs/sync/index.js';
import { createApiClient } from '../../src/api/index.js';
import { applyCardsBatch } from '../../src/sync/apply-cards.js';
import { API_KEY, makeCard, ok, testTokens, useScriptedApi } from '../support/fixtures.js';
import { captureLogger, useCleanups, useTestDatabase } from '../support/helpers.js';
import { testQueue, waitFor } from '../support/queue-helpers.js';

// The mass-removal breaker guards bulk work: during an upstream incident that answers [] for
// everyone, a large list (the bulk lane) stops removing wallets after a few, its jobs are held
// without failing or using an attempt, single re-syncs still go through, and `resume` sends the
// held jobs on.

const database = useTestDatabase();
const upstream = useScriptedApi();
const cleanups = useCleanups();
const { logger, lines } = captureLogger('info');
const q = testQueue({ attempts: 3 });
const SUBSCRIBERS = Array.from({ length: 150 }, (_, i) => 60_001 + i);
const MIN_ANSWERS = 20;
const CONCURRENCY = 2;
const wallets = new Map(SUBSCRIBERS.map((id) => [id, [makeCard(id), makeCard(id)]]));
let outage = false;

const query = async <T extends pg.QueryResultRow>(text: string, values: unknown[] = []) =>
  (await database.handle.pool.query<T>(text, values)).rows;
const wiped = async () =>
  (
    await query<{ n: number }>(
      'select count(*)::int as n from subscribers where subscriber_id = any($1) and active_cards = 0',
      [SUBSCRIBERS],
    )
  )[0]!.n;

beforeAll(async () => {
  for (const id of SUBSCRIBERS) {
    upstream.script.set(`id:${id}`, () => ok(outage ? [] : wallets.get(id)!));
  }
  upstream.script.set('id:69999', ok([makeCard(69_999)]));
  // Every wallet stored, as a sync left it.
  await applyCardsBatch(
    database.handle.db,
    testTokens,
    SUBSCRIBERS.map((id) => ({
      subscriberId: id,
      cards: wallets.get(id)!,
      run: { email: null, trigger: 'manual', jobId: null, refreshRunId: null, startedAt: new Date() },
    })),
  );
});
afterAll(() => q.cleanup());

describe('an upstream that answers [] for everyone, under a bulk list', () => {
  it('pauses the bulk lane after a few wallets, holds the rest, lets single re-syncs through, and resumes', async () => {
    const api = createApiClient({
      baseUrl: upstream.url,
      apiKey: API_KEY,
      pathStyle: 'standard',
      timeoutMs: 2000,
    });
    cleanups.push(() => api.close());
    const worker = await startSyncWorker(
      {
        db: database.handle.db,
        api,
        logger,
        tokens: testTokens,
        queue: q.queue,
        redis: q.redis,
        bulkBreaker: { maxWipeRatio: 0.2, minAnswers: MIN_ANSWERS },
      },
      { redisUrl: inject('redisUrl'), prefix: q.prefix, concurrency: CONCURRENCY },
    );
    cleanups.push(() => worker.close(5000));

    outage = true;
    const counts = await enqueueSyncs(
      q.queue,
      SUBSCRIBERS.map((subscriberId) => ({ subscriberId })),
      'cli',
      {
        lane: 'bulk',
      },
    );
    expect(counts.enqueued).toBe(SUBSCRIBERS.length);
    await waitFor(
      'the bulk lane to pause',
      async () => (await readBulkPause(q.redis, q.prefix)) !== undefined,
    );
    await waitFor('every bulk job to be held or done', async () => {
      const c = await q.queue.getJobCounts('active', 'prioritized', 'waiting');
      return (c.active ?? 0) + (c.prioritized ?? 0) + (c.waiting ?? 0) === 0;
    });

    // The breaker tripped at its first judgement: at most MIN_ANSWERS wallets, plus those in flight.
    const lost = await wiped();
    expect(lost).toBeGreaterThanOrEqual(MIN_ANSWERS);
    expect(lost).toBeLessThanOrEqual(MIN_ANSWERS + CONCURRENCY);
    const held = await heldCount(q.redis, q.prefix);
    expect(held + lost).toBeGreaterThanOrEqual(SUBSCRIBERS.length - CONCURRENCY);
    const jobCounts = await q.queue.getJobCounts('failed', 'delayed');
    expect(jobCounts.failed ?? 0).toBe(0);
    expect(jobCounts.delayed).toBe(held);
    for (const job of await q.queue.getJobs(['delayed'], 0, -1)) expect(job.attemptsMade).toBe(0);
    // The held jobs wait in the delayed set, but they are no refresh backlog: a refresh still fans out.
    expect(await refreshBacklog(q.queue, q.redis)).toBe(0);

    // Said in the log (one line), in status, and the queue itself runs.
    const tripLines = lines.filter((l) => l.includes('bulk lane PAUSED by the mass-removal breaker'));
    expect(tripLines).toHaveLength(1);
    const status = await queueStatusOf(q.queue, q.redis, q.prefix);
    expect(status.paused).toBe(false);
    expect(status.bulkLane).toMatchObject({ paused: true, held });
    expect(status.bulkLane.reason).toMatch(/of the last \d+ bulk answers .* removed every card/);

    // A single re-sync still goes through.
    await enqueueSyncs(q.queue, [{ subscriberId: 69_999 }], 'cli');
    await waitFor('the single re-sync', async () => {
      const r = await query('select 1 from sync_runs where subscriber_id = 69999 and status = $1', [
        'succeeded',
      ]);
      return r.length > 0;
    });
    expect(await heldCount(q.redis, q.prefix)).toBe(held);

    // The API is fixed; resume sends the held jobs on, and every wallet ends as upstream says.
    outage = false;
    const refreshQueue = createRefreshQueue(q.redis, q.prefix);
    cleanups.push(() => refreshQueue.close());
    const outcome = await resumeProcessing({
      db: database.handle.db,
      syncQueue: q.queue,
      refreshQueue,
      redis: q.redis,
    });
    expect(outcome.bulkLane.wasPaused).toBe(true);
    expect(outcome.bulkLane.released).toBeGreaterThanOrEqual(held);
    await waitFor('the held jobs to run', async () => {
      const c = await q.queue.getJobCounts('active', 'prioritized', 'waiting', 'delayed');
      return Object.values(c).every((n) => n === 0);
    });
    // The wallets the incident wiped come back at their next sync (here, a second bulk pass).
    await enqueueSyncs(
      q.queue,
      SUBSCRIBERS.map((subscriberId) => ({ subscriberId })),
      'cli',
      { lane: 'bulk' },
    );
    await waitFor('the second pass', async () => (await wiped()) === 0);
    expect(await readBulkPause(q.redis, q.prefix)).toBeUndefined();
    expect((await q.queue.getJobCounts('failed')).failed ?? 0).toBe(0);
  }, 90_000);
});
