import { sql } from 'drizzle-orm';
import { describe, expect, inject, it } from 'vitest';
import { loadRefreshRun, startRefreshRun } from '../../db/refresh/index.js';
import { queueStatusOf } from '../../jobs/refresh/index.js';
import { LANE_PRIORITY } from '../../jobs/sync/index.js';
import { enqueueSyncs, JOB_NAME } from '../../jobs/sync/queue.js';
import { formatRefresh } from '../../src/cli/status.js';
import { useCleanups, useTestDatabase } from '../support/helpers.js';
import { runCli, testQueue } from '../support/queue-helpers.js';

// `cards-sync status`, `pause` and `resume` as a user runs them: child processes, real Redis and Postgres.

const database = useTestDatabase();
const cleanups = useCleanups();

function setup() {
  const q = testQueue();
  cleanups.push(q.cleanup);
  const env = { REDIS_URL: inject('redisUrl'), QUEUE_PREFIX: q.prefix, DATABASE_URL: database.url };
  return { ...q, env };
}

interface StatusJson {
  queue: {
    prefix: string;
    counts: Record<string, number>;
    paused: boolean;
    pausedBecause?: string;
    pausedBy?: string;
    pausedAt?: string;
    pause?: Record<string, unknown> | null;
    oldestWaitingSeconds: number | null;
    oldestWaitingLane: string | null;
    lanes: Record<'ops' | 'bulk' | 'refresh', { waiting: number; oldestWaitingSeconds: number | null }>;
  };
  data: {
    subscribers: number;
    runsLast24h: Record<string, number>;
    failuresLast24h: { errorCode: string; count: number; lastAt: string }[];
  };
}

async function statusJson(env: Record<string, string>): Promise<StatusJson> {
  const run = await runCli(['status', '--json'], env);
  expect(run.code, run.stderr).toBe(0);
  expect(run.stdout.trim().split('\n')).toHaveLength(1);
  return JSON.parse(run.stdout) as StatusJson;
}

describe('status', () => {
  it('an empty queue: running, all counts 0, no waiting job (exit 0)', async () => {
    const q = setup();
    const run = await runCli(['status'], q.env);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain(`queue saved-cards-sync (prefix ${q.prefix}): running`);
    expect(run.stdout).toContain('waiting 0, active 0, delayed 0, failed 0, completed 0');
    expect(run.stdout).toContain('oldest waiting job: none');
    expect(run.stdout).not.toContain('PAUSED');
    expect(run.stdout).toMatch(/^data: 0 subscribers/m);
  });

  it('three waiting jobs: the count and the age of the oldest one, in text and JSON', async () => {
    const q = setup();
    // The oldest was created 90 s ago.
    await q.queue.add(
      JOB_NAME,
      { target: { subscriberId: 1 }, trigger: 'manual' },
      { jobId: 'id:1:old', timestamp: Date.now() - 90_000 },
    );
    expect(
      await enqueueSyncs(q.queue, [{ subscriberId: 2 }, { email: 'c@example.com' }], 'manual'),
    ).toMatchObject({
      enqueued: 2,
      alreadyQueued: 0,
      promoted: 0,
    });
    const run = await runCli(['status'], q.env);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('waiting 3, active 0');
    const age = /oldest waiting job: (\d+) s/.exec(run.stdout);
    expect(age, run.stdout).not.toBeNull();
    expect(Number(age![1])).toBeGreaterThanOrEqual(89);
    expect(Number(age![1])).toBeLessThan(120);

    const json = await statusJson(q.env);
    expect(json.queue.prefix).toBe(q.prefix);
    expect(json.queue.counts.waiting).toBe(3);
    expect(json.queue.counts).toMatchObject({ active: 0, delayed: 0, failed: 0, completed: 0 });
    expect(json.queue.paused).toBe(false);
    expect(json.queue.oldestWaitingSeconds).toBeGreaterThanOrEqual(89);
    expect(json.data).toMatchObject({ subscribers: 0, failuresLast24h: [] });
  });

  it('jobs in every lane: the oldest in any lane is the head of its lane, and each lane has its own', async () => {
    const q = setup();
    const now = Date.now();
    const job = (id: number, ageS: number, priority: number, refreshRunId?: number) => ({
      name: JOB_NAME,
      data: {
        target: { subscriberId: id },
        trigger: refreshRunId === undefined ? ('cli' as const) : ('nightly' as const),
        ...(refreshRunId === undefined ? {} : { refreshRunId }),
      },
      opts: { jobId: `j${id}`, timestamp: now - ageS * 1000, priority },
    });
    // Added in the order each lane was filled: a file of bulk work 95 s ago, the refresh's fan-out
    // since 40 s ago, a person's re-sync 20 s ago.
    await q.queue.addBulk([
      job(1, 95, LANE_PRIORITY.bulk),
      job(2, 94, LANE_PRIORITY.bulk),
      job(3, 93, LANE_PRIORITY.bulk),
      job(11, 40, LANE_PRIORITY.refresh, 7),
      job(12, 39, LANE_PRIORITY.refresh, 7),
      job(13, 38, LANE_PRIORITY.refresh, 7),
      job(21, 20, LANE_PRIORITY.ops),
    ]);
    // The refresh's share moved to the head of the wait list (jobs/sync/lanes.ts), as a running
    // continuous refresh does all the time: the job a worker takes next is 39 s old.
    await (await q.queue.getJob('j12'))!.changePriority({ priority: 0, lifo: true });
    // A retry back from its backoff enters its lane behind the jobs queued meanwhile.
    await q.queue.add(
      JOB_NAME,
      { target: { subscriberId: 4 }, trigger: 'cli' },
      {
        jobId: 'j4',
        timestamp: now - 5_000,
        priority: LANE_PRIORITY.bulk,
        delay: 60_000,
      },
    );
    await (await q.queue.getJob('j4'))!.promote();

    const direct = await queueStatusOf(q.queue, q.redis, q.prefix);
    expect(direct.oldestWaitingLane).toBe('bulk');
    expect(direct.oldestWaitingSeconds).toBeGreaterThanOrEqual(95);
    expect(direct.oldestWaitingSeconds).toBeLessThan(125);
    expect(direct.lanes.bulk).toEqual({ waiting: 4, oldestWaitingSeconds: direct.oldestWaitingSeconds });
    expect(direct.lanes.refresh.waiting).toBe(2);
    expect(direct.lanes.refresh.oldestWaitingSeconds).toBeGreaterThanOrEqual(40);
    expect(direct.lanes.refresh.oldestWaitingSeconds).toBeLessThan(direct.oldestWaitingSeconds! - 50);
    expect(direct.lanes.ops.waiting).toBe(2);
    expect(direct.lanes.ops.oldestWaitingSeconds).toBeGreaterThanOrEqual(39);
    expect(direct.lanes.ops.oldestWaitingSeconds).toBeLessThan(direct.lanes.refresh.oldestWaitingSeconds!);

    const run = await runCli(['status'], q.env);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('waiting 8, active 0');
    expect(run.stdout).toMatch(
      /oldest waiting job: (9\d|1[01]\d) s \(bulk lane\); by lane: ops \d+ s of 2, bulk \d+ s of 4, refresh \d+ s of 2\n/,
    );
    const json = await statusJson(q.env);
    expect(json.queue.oldestWaitingSeconds).toBeGreaterThanOrEqual(95);
    expect(json.queue.oldestWaitingLane).toBe('bulk');
    expect(Object.keys(json.queue.lanes)).toEqual(['ops', 'bulk', 'refresh']);
    expect(json.queue.lanes.bulk.waiting).toBe(4);
    expect(json.queue.lanes.bulk.oldestWaitingSeconds).toBe(json.queue.oldestWaitingSeconds);
    expect(json.queue.lanes.refresh.oldestWaitingSeconds).toBeGreaterThanOrEqual(40);

    // With the bulk lane served, the oldest is the refresh's head; with nothing waiting, none.
    await q.queue.remove('j1');
    await q.queue.remove('j2');
    await q.queue.remove('j3');
    await q.queue.remove('j4');
    const after = await queueStatusOf(q.queue, q.redis, q.prefix);
    expect(after.oldestWaitingLane).toBe('refresh');
    expect(after.lanes.bulk).toEqual({ waiting: 0, oldestWaitingSeconds: null });
    await q.queue.drain();
    const empty = await queueStatusOf(q.queue, q.redis, q.prefix);
    expect(empty).toMatchObject({ oldestWaitingSeconds: null, oldestWaitingLane: null });
    expect(empty.lanes.ops).toEqual({ waiting: 0, oldestWaitingSeconds: null });
  });

  it('pause --reason, status shows it and how to resume; resume, status is running again', async () => {
    const q = setup();
    await enqueueSyncs(q.queue, [{ subscriberId: 42 }], 'manual');
    const paused = await runCli(['pause', '--reason', 'maintenance'], q.env);
    expect(paused.code, paused.stderr).toBe(0);
    expect(paused.stdout).toMatch(/^paused/);
    expect(await q.queue.isPaused()).toBe(true);

    const text = await runCli(['status'], q.env);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain(': PAUSED');
    expect(text.stdout).toMatch(/paused by operator at \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ: maintenance/);
    expect(text.stdout).toContain('cards-sync resume');
    // Pausing keeps the waiting job waiting.
    expect(text.stdout).toContain('waiting 1,');
    const json = await statusJson(q.env);
    expect(json.queue).toMatchObject({ paused: true, pausedBecause: 'maintenance', pausedBy: 'operator' });
    // A second pause replaces the reason shown; the first stays listed, with who gave each and when.
    const again = await runCli(['pause', '--reason', 'upstream outage, INC-42'], q.env);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(
      /^already paused by operator at \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ; the reason is now: upstream outage, INC-42 \(it was: maintenance; kept in status and the audit\)/,
    );
    const restated = (await statusJson(q.env)).queue;
    expect(restated).toMatchObject({ pausedBecause: 'upstream outage, INC-42', pausedBy: 'operator' });
    // When it was paused stays the first pause's moment.
    expect(restated.pausedAt).toBe(json.queue.pausedAt);
    expect(restated.pause).toMatchObject({
      reason: 'upstream outage, INC-42',
      actor: expect.any(String),
      reasonBy: { actor: expect.any(String), at: expect.any(String) },
      earlier: [{ reason: 'maintenance', at: json.queue.pausedAt, actor: expect.any(String) }],
    });
    const shown = (await runCli(['status'], q.env)).stdout;
    expect(shown).toMatch(/paused by operator at \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ: upstream outage, INC-42\n/);
    expect(shown).toMatch(/ {4}earlier reason \(\S+ at \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ\): maintenance\n/);

    const resumed = await runCli(['resume'], q.env);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout).toMatch(/^resumed/);
    expect(await q.queue.isPaused()).toBe(false);
    const after = await runCli(['status'], q.env);
    expect(after.stdout).toContain(': running');
    // The pause is gone from the queue's state, and stays in the audit trail status lists last.
    const [state, trail] = after.stdout.split('recent operator actions');
    expect(state).not.toContain('maintenance');
    expect(trail).toMatch(
      /\(cli\) {2}resume {2}wasPaused=true endedPauseBy=operator endedPauseReason="upstream outage, INC-42"\n/,
    );
    expect(after.stdout).not.toContain('PAUSED');
    const afterJson = await statusJson(q.env);
    expect(afterJson.queue.paused).toBe(false);
    expect(afterJson.queue).not.toHaveProperty('pausedBecause');
  });

  it('Redis unreachable: exit 1 with one line naming Redis and REDIS_URL (status, pause, resume, enqueue)', async () => {
    const env = { REDIS_URL: 'redis://127.0.0.1:1', QUEUE_PREFIX: 'unreachable', DATABASE_URL: database.url };
    const runs = await Promise.all([
      runCli(['status'], env),
      runCli(['status', '--json'], env),
      runCli(['pause'], env),
      runCli(['resume'], env),
      runCli(['enqueue', '--id', '1'], env),
    ]);
    for (const run of runs) {
      expect(run.code).toBe(1);
      expect(run.stdout).toBe('');
      expect(run.stderr).toMatch(/^cards-sync: cannot reach Redis at 127\.0\.0\.1:1\b.*REDIS_URL/);
      // One line, not a stack trace per reconnection attempt.
      expect(run.stderr.trim().split('\n'), run.stderr).toHaveLength(1);
    }
  });

  it('Postgres database missing: the queue part still shows, the data line says what to do (exit 1)', async () => {
    const q = setup();
    const url = new URL(database.url);
    url.pathname = '/cards_sync_no_such_database';
    const run = await runCli(['status'], { ...q.env, DATABASE_URL: url.toString() });
    expect(run.code).toBe(1);
    expect(run.stdout).toContain(': running');
    expect(run.stdout).toMatch(/^data: .*does not exist; run `cards-sync migrate` first$/m);
  });

  // Last: it leaves rows in this file's database.
  it('recent failed sync runs show up by error code', async () => {
    const q = setup();
    await database.handle.db.execute(sql`
      insert into sync_runs (subscriber_id, trigger, started_at, finished_at, status, error_code, error_message)
      select 900 + g, 'manual', now() - interval '1 minute', now(), 'failed', 'timeout', 'request timed out'
      from generate_series(1, 3) g`);
    await database.handle.db.execute(sql`
      insert into sync_runs (subscriber_id, trigger, started_at, finished_at, status, error_code, error_message)
      values (950, 'manual', now(), now(), 'failed', 'http_5xx', 'HTTP 503')`);
    const run = await runCli(['status'], q.env);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('syncs in the last 24 h: failed 4');
    expect(run.stdout).toContain('failed attempts in the last 24 h by error code (sync_runs):');
    expect(run.stdout).toMatch(/^\s+timeout\s+3\s+last \S/m);
    expect(run.stdout).toMatch(/^\s+http_5xx\s+1\s+last \S/m);
    // Most frequent first.
    expect(run.stdout.indexOf('timeout')).toBeLessThan(run.stdout.indexOf('http_5xx'));

    const json = await statusJson(q.env);
    expect(json.data.runsLast24h).toEqual({ failed: 4 });
    expect(json.data.failuresLast24h.map(({ errorCode, count }) => ({ errorCode, count }))).toEqual([
      { errorCode: 'timeout', count: 3 },
      { errorCode: 'http_5xx', count: 1 },
    ]);
  });

  it('one time format: ISO 8601 in JSON, one readable form for people, never Postgres text', async () => {
    const q = setup();
    await database.handle.db.execute(
      sql`insert into subscribers (subscriber_id, last_success_at) values (990, '2026-11-23 05:16:26.577+00')`,
    );
    await database.handle.db.execute(sql`
      insert into sync_runs (subscriber_id, trigger, started_at, finished_at, status, error_code)
      values (990, 'manual', now(), now(), 'failed', 'timeout')`);
    const json = (await statusJson(q.env)) as unknown as {
      data: { oldestSuccessAt: string; lastSuccessAt: string; failuresLast24h: { lastAt: string }[] };
    };
    expect(json.data.oldestSuccessAt).toBe('2026-11-23T05:16:26.577Z');
    expect(json.data.lastSuccessAt).toBe('2026-11-23T05:16:26.577Z');
    expect(json.data.failuresLast24h[0]!.lastAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    const text = await runCli(['status'], q.env);
    expect(text.stdout).toContain('oldest last success 2026-11-23 05:16:26Z');
    expect(text.stdout).not.toMatch(/\+00\b|\.\d{3}Z/);
    await database.handle.db.execute(sql`truncate subscribers, sync_runs`);
  });
});

describe('status of a refresh run', () => {
  it('once fanned out, says how many of its syncs have not ended (not "finishing" with thousands left)', async () => {
    const started = await startRefreshRun(database.handle.db, { trigger: 'nightly' });
    if (!started.started) throw new Error('a refresh is already in progress');
    try {
      await database.handle.pool.query(
        `update refresh_runs set fanout_finished_at = now(), subscribers_total = 5000, succeeded = 590, failed = 8
         where id = $1`,
        [started.run.id],
      );
      const run = await loadRefreshRun(database.handle.db, started.run.id);
      expect(formatRefresh(run!)).toContain('fanned out; 4402 of its 5000 syncs not ended yet');
    } finally {
      await database.handle.pool.query(`update refresh_runs set status = 'completed' where id = $1`, [
        started.run.id,
      ]);
    }
  });
});

describe('a malformed refresh setting', () => {
  it('status, enqueue and pause warn in one line and go on; the worker and refresh, which use it, refuse (exit 2)', async () => {
    const q = setup();
    const env = { ...q.env, REFRESH_MAX_AGE: 'banana' };
    const warning =
      'cards-sync: warning: REFRESH_MAX_AGE must be a duration of at least 1s in lower-case s, m, h, d or w, ' +
      'such as 90s, 15m, 36h or 7d (got "banana"); this command does not run the refresh and goes on without it, ' +
      'but the worker and `cards-sync refresh` refuse to start until it is fixed';
    // Known already, so that the enqueue has nothing else to say.
    await database.handle.pool.query(
      'insert into subscribers (subscriber_id) values (5) on conflict do nothing',
    );
    for (const args of [['status'], ['enqueue', '--id', '5'], ['pause'], ['resume']]) {
      const run = await runCli(args, env);
      expect(run.code, `${args[0]}: ${run.stderr}`).toBe(0);
      expect(run.stderr.trim().split('\n'), args[0]).toEqual([warning]);
    }
    expect(await q.queue.getJobCounts('waiting')).toEqual({ waiting: 1 });
    for (const args of [['worker', '--exit-when-idle'], ['refresh']]) {
      const run = await runCli(args, env);
      expect(run.code, `${args[0]}: ${run.stderr}`).toBe(2);
      expect(run.stderr.trim(), args[0]).toBe(
        'cards-sync: REFRESH_MAX_AGE must be a duration of at least 1s in lower-case s, m, h, d or w, ' +
          'such as 90s, 15m, 36h or 7d (got "banana")',
      );
    }
  });

  it('says how many enqueued ids the API did not know were forgotten, beside the count they left', async () => {
    const q = setup();
    await database.handle.db.execute(sql`truncate subscribers, sync_runs`);
    // Two ids the API answered 404 and that were forgotten (no subscribers row), one still known.
    await database.handle.db.execute(sql`
      insert into subscribers (subscriber_id, last_success_at) values (995, now())`);
    await database.handle.db.execute(sql`
      insert into sync_runs (subscriber_id, trigger, started_at, finished_at, status)
      values (993, 'manual', now(), now(), 'not_found'), (994, 'manual', now(), now(), 'not_found'),
             (994, 'manual', now(), now(), 'not_found'), (995, 'manual', now(), now(), 'not_found')`);
    const run = await runCli(['status'], q.env);
    expect(run.stdout).toMatch(/^data: 1 subscribers,/m);
    expect(run.stdout).toContain(
      '  2 enqueued ids the API did not know were forgotten in the last 24 h (not counted above; their runs stay in sync_runs)',
    );
    const json = (await statusJson(q.env)) as unknown as { data: { forgottenLast24h: number } };
    expect(json.data.forgottenLast24h).toBe(2);
    await database.handle.db.execute(sql`truncate subscribers, sync_runs`);
  });
});
