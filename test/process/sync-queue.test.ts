import { Job } from 'bullmq';
import { eq, sql } from 'drizzle-orm';
import { afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { createDb } from '../../db/client.js';
import { savedCardChanges, syncRuns } from '../../db/schema/index.js';
import { queueStatusOf } from '../../jobs/refresh/index.js';
import { type SyncWorker, startSyncWorker } from '../../jobs/sync/index.js';
import { enqueueSyncs, JOB_NAME, readPauseReason, resumeQueue } from '../../jobs/sync/queue.js';
import { createApiClient } from '../../src/api/index.js';
import { loadConfig } from '../../src/config/index.js';
import { joinFleet } from '../../src/fleet/index.js';
import { sharedSettings } from '../../src/fleet/shared-settings.js';
import { API_KEY, makeCard, ok, testTokens, useScriptedApi } from '../support/fixtures.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';
import { runCli, testQueue, waitFor } from '../support/queue-helpers.js';

const database = useTestDatabase();
const upstream = useScriptedApi();
const { logger, lines } = captureLogger();
const cleanups: (() => Promise<unknown>)[] = [];

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function setup(
  options: { attempts?: number; apiKey?: string; concurrency?: number; timeoutMs?: number } = {},
) {
  const q = testQueue({ attempts: options.attempts ?? 3 });
  cleanups.push(q.cleanup);
  const api = createApiClient({
    baseUrl: upstream.url,
    apiKey: options.apiKey ?? API_KEY,
    pathStyle: 'standard',
    timeoutMs: options.timeoutMs ?? 2000,
  });
  cleanups.push(() => api.close());
  const start = async (extra: { rateLimitPerSec?: number } = {}) => {
    const w = await startSyncWorker(
      { db: database.handle.db, api, logger, tokens: testTokens, queue: q.queue, redis: q.redis },
      {
        redisUrl: inject('redisUrl'),
        prefix: q.prefix,
        concurrency: options.concurrency ?? 4,
        apiTimeoutMs: options.timeoutMs ?? 2000,
        ...extra,
      },
    );
    cleanups.push(() => w.close(5000));
    return w;
  };
  return { ...q, api, start };
}

const runsOf = (subscriberId: number) =>
  database.handle.db
    .select()
    .from(syncRuns)
    .where(eq(syncRuns.subscriberId, subscriberId))
    .orderBy(syncRuns.id);

async function settled(worker: SyncWorker, queue: ReturnType<typeof testQueue>['queue'], n: number) {
  await waitFor(`${n} finished jobs`, async () => {
    const c = await queue.getJobCounts('completed', 'failed');
    return (c.completed ?? 0) + (c.failed ?? 0) >= n;
  });
  void worker;
}

beforeAll(() => {
  expect(upstream.url).toMatch(/^http/);
});

describe('deduplication', () => {
  it('adds nothing for a subscriber that is already waiting (ids, and e-mails ignoring case)', async () => {
    const { queue } = setup();
    expect(
      await enqueueSyncs(
        queue,
        [{ subscriberId: 1 }, { subscriberId: 1 }, { email: 'A@Example.com' }],
        'manual',
      ),
    ).toMatchObject({
      enqueued: 2,
      alreadyQueued: 1,
      promoted: 0,
    });
    expect(
      await enqueueSyncs(
        queue,
        [{ subscriberId: 1 }, { email: 'a@example.COM' }, { subscriberId: 2 }],
        'manual',
      ),
    ).toMatchObject({
      enqueued: 1,
      alreadyQueued: 2,
      promoted: 0,
    });
    expect((await queue.getJobCounts('waiting')).waiting).toBe(3);
  });

  it('a subscriber enqueued while running runs once more afterwards, not twice', async () => {
    const q = setup();
    upstream.script.set('id:301', { ...ok([makeCard(301)]), delayMs: 400 });
    await enqueueSyncs(q.queue, [{ subscriberId: 301 }], 'manual');
    const worker = await q.start();
    await waitFor('the job to be active', async () => (await q.queue.getJobCounts('active')).active === 1);
    const again = await enqueueSyncs(q.queue, [{ subscriberId: 301 }, { subscriberId: 301 }], 'manual');
    expect(again.enqueued).toBe(0);
    await settled(worker, q.queue, 2);
    await new Promise((r) => setTimeout(r, 600));
    expect(upstream.calls.get('id:301')).toBe(2);
    expect((await runsOf(301)).length).toBe(2);
  });
});

describe('outcomes through the queue', () => {
  it('retries transient failures, then succeeds', async () => {
    const q = setup({ attempts: 4 });
    upstream.script.set('id:302', (n) => (n <= 2 ? { status: 503, body: 'busy' } : ok([makeCard(302)])));
    await enqueueSyncs(q.queue, [{ subscriberId: 302 }], 'manual');
    const worker = await q.start();
    await settled(worker, q.queue, 1);
    const [job] = await q.queue.getJobs(['completed']);
    expect(job?.returnvalue).toMatchObject({ status: 'succeeded', inserted: 1 });
    expect(job?.attemptsMade).toBe(3);
    expect((await runsOf(302)).map((r) => r.status)).toEqual(['failed', 'failed', 'succeeded']);
  });

  it('fails after SYNC_ATTEMPTS transient failures, recording each', async () => {
    const q = setup({ attempts: 3 });
    upstream.script.set('id:303', { status: 502, body: 'bad gateway' });
    await enqueueSyncs(q.queue, [{ subscriberId: 303 }], 'manual');
    const worker = await q.start();
    await settled(worker, q.queue, 1);
    const [job] = await q.queue.getJobs(['failed']);
    expect(job?.attemptsMade).toBe(3);
    expect((await runsOf(303)).map((r) => r.errorCode)).toEqual(['http_5xx', 'http_5xx', 'http_5xx']);
  });

  it('a failed job keeps its message in Redis but no stack trace, on a retry and at the end', async () => {
    const q = setup({ attempts: 2 });
    upstream.script.set('id:304', { status: 502, body: 'bad gateway' });
    const [jobId] = (await enqueueSyncs(q.queue, [{ subscriberId: 304 }], 'manual')).jobIds;
    const worker = await q.start();
    await settled(worker, q.queue, 1);
    const job = await Job.fromId(q.queue, jobId!);
    expect(job?.attemptsMade).toBe(2);
    expect(job?.failedReason).toMatch(/502/);
    expect(job?.stacktrace).toEqual([]);
  });

  it.each([
    ['404', { status: 404 }, 'not_found', 310],
    ['a refused answer', ok([{ id: 1 }]), 'invalid_response', 311],
    ['HTTP 400', { status: 400 }, 'failed', 312],
  ] as const)('%s fails at once, after its sync_runs row', async (_name, reply, status, id) => {
    // A subscriber of its own each: two cases drawing the same random id read each other's runs.
    const q = setup({ attempts: 5 });
    upstream.script.set(`id:${id}`, reply);
    await enqueueSyncs(q.queue, [{ subscriberId: id }], 'manual');
    const worker = await q.start();
    await settled(worker, q.queue, 1);
    const [job] = await q.queue.getJobs(['failed']);
    expect(job?.attemptsMade).toBe(1);
    expect(job?.failedReason).toContain(status);
    expect((await runsOf(id)).map((r) => r.status)).toEqual([status]);
  });

  it('a rejected key pauses the queue; no job fails or loses an attempt; resume finishes them', async () => {
    const q = setup({ apiKey: 'wrong-key-0000' });
    const ids = [320, 321, 322];
    for (const id of ids) upstream.script.delete(`id:${id}`);
    await enqueueSyncs(
      q.queue,
      ids.map((subscriberId) => ({ subscriberId })),
      'manual',
    );
    const bad = await q.start();
    await waitFor('the queue to pause', () => q.queue.isPaused());
    await new Promise((r) => setTimeout(r, 300));
    const counts = await q.queue.getJobCounts('failed', 'completed', 'waiting', 'active');
    expect(counts).toMatchObject({ failed: 0, completed: 0, active: 0, waiting: 3 });
    for (const job of await q.queue.getJobs(['waiting'])) expect(job.attemptsMade).toBe(0);
    expect((await readPauseReason(q.queue, q.redis))?.by).toBe('auth_rejected');
    expect(lines.some((l) => l.includes('cards-sync resume') && l.includes('CARDS_API_KEY'))).toBe(true);
    await bad.close(5000);

    const good = createApiClient({
      baseUrl: upstream.url,
      apiKey: API_KEY,
      pathStyle: 'standard',
      timeoutMs: 2000,
    });
    cleanups.push(() => good.close());
    const worker = await startSyncWorker(
      { db: database.handle.db, api: good, logger, tokens: testTokens, queue: q.queue, redis: q.redis },
      { redisUrl: inject('redisUrl'), prefix: q.prefix, concurrency: 2 },
    );
    cleanups.push(() => worker.close(5000));
    await resumeQueue(q.queue, q.redis);
    await settled(worker, q.queue, 3);
    expect((await q.queue.getJobCounts('completed')).completed).toBe(3);
    for (const id of ids)
      expect((await runsOf(id)).map((r) => r.status)).toEqual(['auth_rejected', 'succeeded']);
  });

  it('a 429 holds every worker for Retry-After without using an attempt', async () => {
    const q = setup({ attempts: 1, concurrency: 1 });
    upstream.script.set('id:330', (n) =>
      n === 1 ? { status: 429, headers: { 'retry-after': '1' } } : ok([makeCard(330)]),
    );
    upstream.script.set('id:331', ok([makeCard(331)]));
    await enqueueSyncs(q.queue, [{ subscriberId: 330 }], 'manual');
    const worker = await q.start();
    await waitFor('the 429', async () => upstream.calls.get('id:330') === 1);
    const limitedAt = Date.now();
    await enqueueSyncs(q.queue, [{ subscriberId: 331 }], 'manual');
    await settled(worker, q.queue, 2);
    const times = upstream.mock.requests
      .filter((r) => r.path.endsWith('/330') || r.path.endsWith('/331'))
      .map((r) => r.at);
    expect(times.length).toBe(3);
    // Nothing reached the API during the second after the 429.
    expect(Math.min(times[1]!, times[2]!) - limitedAt).toBeGreaterThanOrEqual(900);
    expect((await q.queue.getJobCounts('completed')).completed).toBe(2);
  });
});

describe('a payload queued before the e-mail rule', () => {
  it('an e-mail enqueue would refuse fails for good, naming the rule and never the address; nothing asked, nothing written', async () => {
    const q = setup({ attempts: 3 });
    const address = 'jane..doe@example.com';
    // As an earlier release queued it: its schema only bounded the length.
    const job = await q.queue.add(
      JOB_NAME,
      { target: { email: address }, trigger: 'cli' },
      { jobId: 'old:malformed:1' },
    );
    const requestsBefore = upstream.mock.requests.length;
    const runsBefore = (await database.handle.pool.query('select count(*)::int as n from sync_runs')).rows[0]
      .n;
    await q.start();
    await waitFor('the job to fail', async () => (await q.queue.getJob(job.id!))?.finishedOn !== undefined);
    const failed = (await q.queue.getJob(job.id!))!;
    expect(await failed.getState()).toBe('failed');
    // Unrecoverable: one attempt, no retry.
    expect(failed.attemptsMade).toBe(1);
    expect(failed.failedReason).toBe(
      "the job's e-mail is not one enqueue accepts: the name before @ must not hold two dots in a row; correct it and enqueue it again with cards-sync enqueue",
    );
    expect(failed.failedReason).not.toContain('jane');
    expect(lines.filter((l) => l.includes('jane'))).toEqual([]);
    expect(upstream.mock.requests.length).toBe(requestsBefore);
    expect((await database.handle.pool.query('select count(*)::int as n from sync_runs')).rows[0].n).toBe(
      runsBefore,
    );
  });
});

describe('status says whose hold it is', () => {
  const holdOf = async (q: ReturnType<typeof setup>, ownRateLimitPerSec = 0) => {
    let seen: Awaited<ReturnType<typeof queueStatusOf>> | undefined;
    await waitFor('a hold', async () => {
      seen = await queueStatusOf(q.queue, q.redis, q.prefix, ownRateLimitPerSec);
      return seen.rateLimitedForMs > 0;
    });
    return seen!;
  };

  it("the API's 429: rate limited by the API, for its Retry-After", async () => {
    const q = setup({ attempts: 1, concurrency: 1 });
    upstream.script.set('id:340', (n) =>
      n === 1 ? { status: 429, headers: { 'retry-after': '30' } } : ok([makeCard(340)]),
    );
    await enqueueSyncs(q.queue, [{ subscriberId: 340 }], 'manual');
    await q.start();
    const seen = await holdOf(q);
    expect(seen.rateLimitedBy).toBe('api_429');
    expect(seen.rateLimitedForMs).toBeGreaterThan(20_000);
    const text = await runCli(['status'], {
      REDIS_URL: inject('redisUrl'),
      QUEUE_PREFIX: q.prefix,
      DATABASE_URL: database.url,
    });
    expect(text.stdout).toMatch(
      /rate limited by the API \(a 429 and its Retry-After\): every worker waits for another \d+ ms/,
    );
  });

  it('our own SYNC_RATE_LIMIT_PER_SEC: paced by it, never blamed on the API', async () => {
    const q = setup({ concurrency: 1 });
    for (const id of [341, 342, 343]) upstream.script.set(`id:${id}`, ok([makeCard(id)]));
    await enqueueSyncs(
      q.queue,
      [341, 342, 343].map((subscriberId) => ({ subscriberId })),
      'manual',
    );
    await q.start({ rateLimitPerSec: 1 });
    const seen = await holdOf(q, 1);
    expect(seen.rateLimitedBy).toBe('own_limit');
    expect(seen.rateLimitedForMs).toBeLessThanOrEqual(1000);
  });

  it("status without SYNC_RATE_LIMIT_PER_SEC in its environment tells the live workers' pacing, from the fleet", async () => {
    const q = setup({ concurrency: 1 });
    const ids = Array.from({ length: 30 }, (_, i) => 3600 + i);
    for (const id of ids) upstream.script.set(`id:${id}`, ok([makeCard(id)]));
    await enqueueSyncs(
      q.queue,
      ids.map((subscriberId) => ({ subscriberId })),
      'manual',
    );
    // The worker runs at 1 a second and says so in the registry, as `cards-sync worker` does.
    const worker = await joinFleet(database.handle.pool, {
      role: 'worker',
      version: 'test',
      knownMigration: 'test',
      keyIds: [],
      concurrency: 1,
      settings: sharedSettings(loadConfig({ SYNC_RATE_LIMIT_PER_SEC: '1', QUEUE_PREFIX: q.prefix })),
    });
    cleanups.push(() => worker.leave());
    await q.start({ rateLimitPerSec: 1 });
    const env = { REDIS_URL: inject('redisUrl'), QUEUE_PREFIX: q.prefix, DATABASE_URL: database.url };
    // The limiter holds the queue for most of each second; a status may fall in the rest of one.
    const shown = await waitFor(
      'status showing the pacing',
      async () => {
        const run = await runCli(['status'], env);
        return run.stdout.includes('paced by SYNC_RATE_LIMIT_PER_SEC') && run.stdout;
      },
      20_000,
    );
    expect(shown).toMatch(
      /paced by SYNC_RATE_LIMIT_PER_SEC \(our own limit, not the API\): the next job waits for another \d+ ms/,
    );
    expect(shown).not.toContain('rate limited by the API');
  });

  it('no limit and no hold: a job just taken is not reported as a hold', async () => {
    const q = setup({ concurrency: 1 });
    upstream.script.set('id:344', ok([makeCard(344)]));
    await enqueueSyncs(q.queue, [{ subscriberId: 344 }], 'manual');
    const worker = await q.start();
    // BullMQ's limiter counts that job in its one-second window: no hold for all that.
    const seen = await waitFor('a status while the job is counted', async () => {
      if ((await q.queue.getRateLimitTtl(1)) < 300) return false;
      return queueStatusOf(q.queue, q.redis, q.prefix, 0);
    });
    expect(seen).toMatchObject({ rateLimitedForMs: 0, rateLimitedBy: null });
    await settled(worker, q.queue, 1);
  });
});

describe('Postgres away', () => {
  it('holds every worker without failing a job or using an attempt, then finishes when it is back', async () => {
    const q = setup({ attempts: 2 });
    upstream.script.set('id:360', ok([makeCard(360)]));
    const deadDb = createDb('postgres://postgres@127.0.0.1:1/none', { max: 2 });
    cleanups.push(() => deadDb.close());
    const blind = await startSyncWorker(
      { db: deadDb.db, api: q.api, logger, tokens: testTokens, queue: q.queue, redis: q.redis },
      { redisUrl: inject('redisUrl'), prefix: q.prefix, concurrency: 1 },
    );
    await enqueueSyncs(q.queue, [{ subscriberId: 360 }], 'manual');
    await waitFor('the hold', async () => (await q.queue.getRateLimitTtl(1)) > 0);
    expect((await queueStatusOf(q.queue, q.redis, q.prefix)).rateLimitedBy).toBe('database');
    await blind.close(5000);
    expect(await q.queue.getJobCounts('failed', 'completed')).toEqual({ failed: 0, completed: 0 });
    const [job] = await q.queue.getJobs(['waiting', 'delayed', 'prioritized']);
    expect(job?.attemptsMade).toBe(0);
    expect(lines.some((l) => l.includes('Postgres is unreachable'))).toBe(true);
    await q.queue.removeRateLimitKey();
    const worker = await q.start();
    await settled(worker, q.queue, 1);
    expect((await q.queue.getJobCounts('completed')).completed).toBe(1);
  });
});

describe('cancellation', () => {
  it('the processor’s abort signal reaches the HTTP request', async () => {
    const q = setup({ attempts: 1, timeoutMs: 5000 });
    upstream.script.set('id:350', { ...ok([makeCard(350)]), delayMs: 3000 });
    await enqueueSyncs(q.queue, [{ subscriberId: 350 }], 'manual');
    const worker = await q.start();
    const [job] = await waitFor('the job to be active', async () => {
      const active = await q.queue.getJobs(['active']);
      return active.length === 1 && upstream.calls.get('id:350') === 1 ? active : false;
    });
    const started = Date.now();
    expect(worker.worker.cancelJob(job!.id!, 'operator cancelled')).toBe(true);
    await settled(worker, q.queue, 1);
    expect(Date.now() - started).toBeLessThan(2000);
    expect((await runsOf(350)).map((r) => [r.status, r.errorCode])).toEqual([['failed', 'aborted']]);
  });
});

describe('at-least-once effects', () => {
  it('the same job run twice leaves the same rows and no duplicate history', async () => {
    const q = setup();
    upstream.script.set('id:340', ok([makeCard(340), makeCard(340)]));
    const worker = await q.start();
    await enqueueSyncs(q.queue, [{ subscriberId: 340 }], 'manual');
    await settled(worker, q.queue, 1);
    await enqueueSyncs(q.queue, [{ subscriberId: 340 }], 'manual');
    await settled(worker, q.queue, 2);
    const history = await database.handle.db
      .select({ n: sql<number>`count(*)::int` })
      .from(savedCardChanges)
      .where(eq(savedCardChanges.subscriberId, 340));
    expect(history[0]!.n).toBe(2);
  });
});
