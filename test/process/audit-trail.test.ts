import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq, gt } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { AdminActionRow } from '../../db/audit/index.js';
import { createDb } from '../../db/client.js';
import { adminActions, refreshRuns, subscribers } from '../../db/schema/index.js';
import { pauseProcessing } from '../../jobs/refresh/index.js';
import { QUEUE_NAME } from '../../jobs/sync/index.js';
import { createAdminApp } from '../../src/admin/app.js';
import { cliActor } from '../../src/audit/index.js';
import { createMetrics } from '../../src/metrics/index.js';
import { CSRF, READ_TOKEN, useAdminApp } from '../support/admin-client.js';
import { ADMIN_TOKEN } from '../support/fixtures.js';
import { captureLogger, useCleanups, useTestDatabase } from '../support/helpers.js';
import { runCli, testQueue } from '../support/queue-helpers.js';

// The audit trail: every operator action, from the CLI or over HTTP, leaves exactly one
// admin_actions row saying who did what, with counts and reasons but never a secret or an e-mail.

const database = useTestDatabase();
const admin = useAdminApp(database);
const cleanups = useCleanups();
const { q, post, send } = admin;
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cards-sync-audit-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function lastId(): Promise<number> {
  const rows = await database.handle.db.select({ id: adminActions.id }).from(adminActions);
  return Math.max(0, ...rows.map((r) => r.id));
}

/** The rows `act` added, oldest first. */
async function rowsOf(act: () => unknown): Promise<AdminActionRow[]> {
  const before = await lastId();
  await act();
  return database.handle.db
    .select()
    .from(adminActions)
    .where(gt(adminActions.id, before))
    .orderBy(adminActions.id);
}

/** The one row `act` added. */
async function rowOf(act: () => unknown): Promise<AdminActionRow> {
  const rows = await rowsOf(act);
  expect(rows).toHaveLength(1);
  return rows[0]!;
}

const json = (path: string, body: unknown, method = 'POST') =>
  send(path, {}, { method, body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });

describe('over HTTP, as the operator', () => {
  const http = { actor: 'operator', source: 'http' };

  it('POST /api/resync: the counts', async () => {
    const row = await rowOf(async () => {
      const res = await json('/api/resync', {
        subscriberIds: [8001, 8002],
        emails: ['ada@example.com', 'x'],
      });
      expect(res.status).toBe(400);
    });
    expect(row).toMatchObject({ ...http, action: 'enqueue' });
    expect(row.detail).toEqual({
      enqueued: 3,
      alreadyQueued: 0,
      promoted: 0,
      // 8001 and 8002 were not known: now they are, as never synced.
      registered: 2,
      rejected: 1,
      lane: 'ops',
      route: 'POST /api/resync',
    });
    // Nothing valid, nothing done: no row.
    expect(await rowsOf(() => json('/api/resync', { subscriberIds: ['nope'] }))).toEqual([]);
  });

  it("the ops page's re-syncs: the subscriber's id, and for an e-mail only that there was one", async () => {
    const byId = await rowOf(() => post('/admin/subscribers/8001/resync'));
    expect(byId).toMatchObject({ ...http, action: 'enqueue' });
    expect(byId.detail).toEqual({
      subscriberId: 8001,
      enqueued: 0,
      alreadyQueued: 1,
      promoted: 0,
      registered: 0,
      route: 'POST /admin/subscribers/:id/resync',
    });
    const byEmail = await rowOf(() => post('/admin/resync-email', { email: 'grace@example.com' }));
    expect(byEmail.detail).toEqual({
      emails: 1,
      enqueued: 1,
      alreadyQueued: 0,
      promoted: 0,
      route: 'POST /admin/resync-email',
    });
  });

  it('pause with its reason (e-mail addresses in it masked), a second pause, resume with the reason it ended', async () => {
    const paused = await rowOf(() =>
      post('/admin/pause', { reason: 'upstream maintenance, ask ops@example.com' }),
    );
    expect(paused).toMatchObject({ ...http, action: 'pause' });
    expect(paused.detail).toEqual({
      reason: 'upstream maintenance, ask [e-mail]',
      route: 'POST /admin/pause',
    });
    const again = await rowOf(() => post('/admin/pause', { reason: 'again' }));
    expect(again.detail).toEqual({
      reason: 'again',
      alreadyPaused: true,
      replacedReason: 'upstream maintenance, ask [e-mail]',
      pausedBy: 'operator',
      pausedByActor: 'operator',
      route: 'POST /admin/pause',
    });
    const resumed = await rowOf(() => post('/admin/resume'));
    expect(resumed).toMatchObject({ ...http, action: 'resume' });
    expect(resumed.detail).toEqual({
      wasPaused: true,
      endedPauseReason: 'again',
      endedPauseBy: 'operator',
      route: 'POST /admin/resume',
    });
    const idle = await rowOf(() => post('/admin/resume'));
    expect(idle.detail).toEqual({ wasPaused: false, route: 'POST /admin/resume' });
  });

  it('resume of a refresh run the breaker halted: refresh_resume, with the run', async () => {
    const [run] = await database.handle.db
      .insert(refreshRuns)
      .values({ trigger: 'nightly', status: 'halted', startedAt: new Date(), haltedReason: 'too many wipes' })
      .returning({ id: refreshRuns.id });
    await pauseProcessing({ syncQueue: q.queue, redis: q.redis }, 'breaker stand-in');
    const row = await rowOf(() => post('/admin/resume'));
    expect(row).toMatchObject({ ...http, action: 'refresh_resume' });
    expect(row.detail).toEqual({
      wasPaused: true,
      endedPauseReason: 'breaker stand-in',
      endedPauseBy: 'operator',
      refreshRunId: run!.id,
      route: 'POST /admin/resume',
    });
    // No worker takes it here: close it, so that the CLI's refresh below may start one.
    await database.handle.db
      .update(refreshRuns)
      .set({ status: 'completed', finishedAt: new Date() })
      .where(eq(refreshRuns.id, run!.id));
  });

  it("Bull Board's writes: the route and its parameters; one that fails leaves none", async () => {
    const base = `/admin/queues/api/queues/${QUEUE_NAME}`;
    const row = await rowOf(() => send(`${base}/pause`, {}, { method: 'PUT' }));
    expect(row).toMatchObject({ ...http, action: 'dashboard' });
    expect(row.detail).toEqual({
      queueName: QUEUE_NAME,
      route: 'PUT /admin/queues/api/queues/:queueName/pause',
    });
    expect(await q.queue.isPaused()).toBe(true);
    await rowOf(() => send(`${base}/resume`, {}, { method: 'PUT' }));
    const missing = await rowsOf(async () => {
      expect((await send(`${base}/no-such-job/retry`, {}, { method: 'PUT' })).status).toBe(404);
    });
    expect(missing).toEqual([]);
  });

  it('a refused request leaves no row: the reader, a bad CSRF value, a bad reason', async () => {
    const rows = await rowsOf(async () => {
      expect((await post('/admin/pause', { reason: 'x' }, { token: READ_TOKEN })).status).toBe(403);
      expect((await post('/admin/pause', { reason: 'x' }, { csrf: 'forged' })).status).toBe(403);
      expect((await post('/admin/pause', { reason: '' })).status).toBe(400);
      expect((await send('/api/resync', { token: READ_TOKEN }, { method: 'POST', body: '{}' })).status).toBe(
        403,
      );
    });
    expect(rows).toEqual([]);
  });

  it('an action whose row cannot be written is still done and answered, with a warning in the log', async () => {
    const dead = createDb('postgres://postgres@127.0.0.1:1/none', { max: 1 });
    cleanups.push(() => dead.close());
    const { logger, lines } = captureLogger();
    const broken = createAdminApp({
      db: dead.db,
      redis: q.redis,
      syncQueue: q.queue,
      refreshQueue: admin.refreshQueue(),
      metrics: createMetrics({ defaultMetrics: false }),
      logger,
      adminToken: ADMIN_TOKEN,
      prefix: q.prefix,
    });
    const res = await broken.app.fetch(
      new Request('http://admin.test/admin/pause', {
        method: 'POST',
        headers: {
          authorization: `Bearer ${ADMIN_TOKEN}`,
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: new URLSearchParams({ _csrf: CSRF, reason: 'postgres is down' }).toString(),
      }),
    );
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/admin?done=paused');
    expect(await q.queue.isPaused()).toBe(true);
    const warning = lines
      .map((l) => JSON.parse(l) as { level: number; msg: string })
      .find((l) => l.level === 40);
    expect(warning?.msg).toContain('audit row (admin_actions) could not be written');
    await post('/admin/resume');
  });

  it('the overview lists the last five actions, newest first', async () => {
    const html = await (await admin.get('/admin')).text();
    const table = /<table id="actions">.*?<\/table>/s.exec(html)?.[0] ?? '';
    const recent = await database.handle.db.select().from(adminActions).orderBy(adminActions.id);
    const newest = recent.slice(-5).reverse();
    expect([...table.matchAll(/<tr data-action="([a-z_]+)"/g)].map((m) => m[1])).toEqual(
      newest.map((r) => r.action),
    );
    expect(table).toContain('<td>operator</td><td>http</td><td>resume</td>');
    // The reader sees them too.
    expect(await (await admin.get('/admin', { token: READ_TOKEN })).text()).toContain('<table id="actions">');
  });
});

describe('from the CLI, as the OS user', () => {
  const cli = { actor: cliActor(), source: 'cli' };

  function setup() {
    const queue = testQueue();
    cleanups.push(queue.cleanup);
    const env = { REDIS_URL: inject('redisUrl'), QUEUE_PREFIX: queue.prefix, DATABASE_URL: database.url };
    return { ...queue, env };
  }

  it('enqueue: the counts, and the file or stdin; a --strict refusal leaves none', async () => {
    const s = setup();
    const named = await rowOf(async () => {
      const run = await runCli(
        ['enqueue', '--id', '9001', '--id', '9002', '--email', 'lin@example.com'],
        s.env,
      );
      expect(run.code, run.stderr).toBe(0);
    });
    expect(named).toMatchObject({ ...cli, action: 'enqueue' });
    expect(named.detail).toEqual({
      enqueued: 3,
      alreadyQueued: 0,
      promoted: 0,
      registered: 2,
      rejected: 0,
      ids: 2,
      emails: 1,
    });

    const path = join(dir, 'ids.txt');
    await writeFile(path, '9001\n9003\nnot an id\n');
    const file = await rowOf(async () =>
      expect((await runCli(['enqueue', '--file', path], s.env)).code).toBe(1),
    );
    expect(file.detail).toEqual({
      enqueued: 1,
      alreadyQueued: 1,
      promoted: 0,
      // 9001 was known from the enqueue above; 9003 is new.
      registered: 1,
      rejected: 1,
      ids: 0,
      emails: 0,
      file: path,
      fileLines: 3,
    });
    const stdin = await rowOf(async () =>
      expect((await runCli(['enqueue', '--file', '-'], s.env, '9004\nmo@example.com\n')).code).toBe(0),
    );
    expect(stdin.detail).toMatchObject({ enqueued: 2, file: 'stdin', fileLines: 2 });
    const strict = await rowsOf(async () =>
      expect((await runCli(['enqueue', '--strict', '--file', path], s.env)).code).toBe(1),
    );
    expect(strict).toEqual([]);
  });

  it('pause with its reason, resume with the reason it ended', async () => {
    const s = setup();
    const paused = await rowOf(async () =>
      expect((await runCli(['pause', '--reason', 'deploy'], s.env)).code).toBe(0),
    );
    expect(paused).toMatchObject({ ...cli, action: 'pause', detail: { reason: 'deploy' } });
    // A second pause replaces the reason; its row says which reason it replaced, and who paused when.
    const again = await rowOf(() => runCli(['pause', '--reason', 'deploy of 1.4, INC-7'], s.env));
    expect(again).toMatchObject({ ...cli, action: 'pause' });
    expect(again.detail).toEqual({
      reason: 'deploy of 1.4, INC-7',
      alreadyPaused: true,
      replacedReason: 'deploy',
      pausedBy: 'operator',
      pausedByActor: cli.actor,
    });
    const resumed = await rowOf(async () => expect((await runCli(['resume'], s.env)).code).toBe(0));
    expect(resumed).toMatchObject({ ...cli, action: 'resume' });
    expect(resumed.detail).toEqual({
      wasPaused: true,
      endedPauseReason: 'deploy of 1.4, INC-7',
      endedPauseBy: 'operator',
    });
  });

  it('refresh: the run it started, or that it found nothing to do', async () => {
    const s = setup();
    // The subscribers the enqueues above made known, never synced, would be stale: not this test's.
    await database.handle.pool.query('delete from subscribers where last_synced_at is null');
    const none = await rowOf(async () =>
      expect((await runCli(['refresh', '--stale', '1h'], s.env)).code).toBe(0),
    );
    expect(none).toMatchObject({
      ...cli,
      action: 'refresh',
      detail: { stale: '1h', matching: 0, started: false },
    });
    await database.handle.db.insert(subscribers).values([{ subscriberId: 9101 }, { subscriberId: 9102 }]);
    const started = await rowOf(async () => {
      const run = await runCli(['refresh'], s.env);
      expect(run.code, run.stderr).toBe(0);
    });
    expect(started).toMatchObject({ ...cli, action: 'refresh', detail: { started: true } });
    expect(started.detail.matching).toBeGreaterThanOrEqual(2);
    expect(started.detail.refreshRunId).toEqual(expect.any(Number));
    const again = await rowOf(async () => expect((await runCli(['refresh'], s.env)).code).toBe(1));
    expect(again.detail).toMatchObject({ started: false, inProgressRunId: started.detail.refreshRunId });
  });

  it('an action whose row cannot be written is still done, and says so on stderr with exit 0', async () => {
    const s = setup();
    const env = { ...s.env, DATABASE_URL: `${database.url}_missing` };
    const run = await runCli(['pause', '--reason', 'postgres is away'], env);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('paused: workers finish their current jobs');
    expect(run.stderr).toMatch(
      /warning: the pause was done, but its audit row \(admin_actions\) could not be written: .*does not exist/,
    );
    expect(await s.queue.isPaused()).toBe(true);
  });

  it('status lists the last five actions; --json as recentActions with ISO times', async () => {
    const s = setup();
    const newest = (await database.handle.db.select().from(adminActions).orderBy(adminActions.id))
      .slice(-5)
      .reverse();
    const text = await runCli(['status'], s.env);
    expect(text.code, text.stderr).toBe(0);
    const lines = text.stdout.split('\n');
    const head = lines.indexOf('recent operator actions (admin_actions, newest first):');
    expect(head).toBeGreaterThan(0);
    const listed = lines.slice(head + 1, head + 6);
    expect(listed).toHaveLength(5);
    for (const [i, row] of newest.entries()) {
      expect(listed[i]).toMatch(/^ {2}\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ {2}/);
      expect(listed[i]).toContain(`${row.actor} (${row.source})  ${row.action}`);
    }
    const run = await runCli(['status', '--json'], s.env);
    const { recentActions } = JSON.parse(run.stdout) as {
      recentActions: { at: string; actor: string; source: string; action: string; detail: unknown }[];
    };
    expect(recentActions.map((a) => a.action)).toEqual(newest.map((r) => r.action));
    expect(recentActions[0]).toEqual({
      at: newest[0]!.at.toISOString(),
      actor: newest[0]!.actor,
      source: newest[0]!.source,
      action: newest[0]!.action,
      detail: newest[0]!.detail,
    });
  });
});

describe('every row', () => {
  it('holds no token, CSRF value or e-mail address', async () => {
    const rows = await database.handle.db.select().from(adminActions);
    expect(rows.length).toBeGreaterThan(15);
    const text = JSON.stringify(rows);
    for (const secret of [ADMIN_TOKEN, READ_TOKEN, CSRF]) expect(text).not.toContain(secret);
    expect(text).not.toMatch(/[\w.+-]+@[\w-]+\.[\w.]+/);
  });
});
