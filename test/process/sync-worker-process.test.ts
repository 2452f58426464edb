import { type AddressInfo, createServer } from 'node:net';
import { sql } from 'drizzle-orm';
import { describe, expect, inject, it } from 'vitest';
import { enqueueSyncs, QUEUE_NAME } from '../../jobs/sync/index.js';
import { cardsFor } from '../../src/mock-api/data.js';
import { API_KEY, CARD_TOKEN_KEYS, ok, useScriptedApi } from '../support/fixtures.js';
import { useCleanups, useTestDatabase } from '../support/helpers.js';
import { type CliProcess, startCli, testQueue, waitFor } from '../support/queue-helpers.js';

// Workers as real processes, the way they run in production.

const database = useTestDatabase();
const upstream = useScriptedApi();
const cleanups = useCleanups();

function setup(extraEnv: Record<string, string> = {}) {
  const q = testQueue({ attempts: 3 });
  cleanups.push(q.cleanup);
  const env = {
    DATABASE_URL: database.url,
    REDIS_URL: inject('redisUrl'),
    QUEUE_PREFIX: q.prefix,
    CARDS_API_BASE_URL: upstream.url,
    CARDS_API_KEY: API_KEY,
    CARD_TOKEN_KEYS,
    CARDS_API_TIMEOUT_MS: '1000',
    LOG_LEVEL: 'info',
    ...extraEnv,
  };
  const worker = (...args: string[]): CliProcess => {
    const p = startCli(['worker', ...args], env);
    cleanups.push(async () => {
      if (p.process.exitCode === null) p.process.kill('SIGKILL');
      await p.done;
    });
    return p;
  };
  return { ...q, env, worker };
}

async function countRows(query: ReturnType<typeof sql>): Promise<number> {
  const r = await database.handle.db.execute<{ n: number }>(query);
  return r.rows[0]!.n;
}

describe('worker processes', () => {
  it('worker --admin whose admin port is taken exits 1 saying so, instead of running without /metrics', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise((resolve) => taken.close(resolve)));
    const { port } = taken.address() as AddressInfo;
    const q = setup({ ADMIN_HOST: '127.0.0.1', ADMIN_PORT: String(port) });
    const run = await q.worker('--admin').done;
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`the admin server cannot listen on 127.0.0.1:${port}`);
    expect(run.stdout + run.stderr).not.toContain('worker started');
  });

  it('two workers on one queue produce each subscriber’s effects once', async () => {
    const q = setup();
    const ids = Array.from({ length: 150 }, (_, i) => 50_000 + i);
    await enqueueSyncs(
      q.queue,
      ids.map((subscriberId) => ({ subscriberId })),
      'manual',
    );
    const a = q.worker('--exit-when-idle', '--concurrency', '8');
    const b = q.worker('--exit-when-idle', '--concurrency', '8');
    const [ra, rb] = await Promise.all([a.done, b.done]);
    expect([ra.code, rb.code]).toEqual([0, 0]);
    const expected = ids.reduce((n, id) => n + cardsFor(id).length, 0);
    expect(
      await countRows(
        sql`select count(*)::int as n from saved_cards where subscriber_id between 50000 and 50149`,
      ),
    ).toBe(expected);
    expect(
      await countRows(
        sql`select count(*)::int as n from saved_card_changes where subscriber_id between 50000 and 50149 and change = 'added'`,
      ),
    ).toBe(expected);
    expect(
      await countRows(
        sql`select count(*)::int as n from sync_runs where subscriber_id between 50000 and 50149`,
      ),
    ).toBe(150);
    // Both took a share of the work.
    expect(ra.stderr).toContain('sync succeeded');
    expect(rb.stderr).toContain('sync succeeded');
  });

  it('a 429 makes every worker process wait as Retry-After says', async () => {
    const q = setup();
    const ids = Array.from({ length: 20 }, (_, i) => 51_000 + i);
    let limited = false;
    for (const id of ids) {
      upstream.script.set(`id:${id}`, () => {
        if (!limited && id === 51_005) {
          limited = true;
          return { status: 429, headers: { 'retry-after': '2' } };
        }
        return ok(cardsFor(id));
      });
    }
    const a = q.worker('--concurrency', '1');
    const b = q.worker('--concurrency', '1');
    await new Promise((r) => setTimeout(r, 1500));
    const before = upstream.mock.requests.length;
    // When the hold is in force, watched from here: its note is written just before BullMQ's
    // queue-wide limit is set. The counts below start from it rather than from a guess at how
    // soon the process that met the 429 gets to set it (late on a machine under load).
    const holdNote = `${q.prefix}:${QUEUE_NAME}:cards-sync:hold-cause`;
    let held: number | undefined;
    const watch = setInterval(() => {
      void q.redis.exists(holdNote).then((n) => {
        if (n > 0) held ??= Date.now();
      });
    }, 5);
    await enqueueSyncs(
      q.queue,
      ids.map((subscriberId) => ({ subscriberId })),
      'manual',
    );
    await waitFor('all jobs', async () => (await q.queue.getJobCounts('completed')).completed === 20, 30_000);
    clearInterval(watch);
    const times = upstream.mock.requests.slice(before).map((r) => ({ at: r.at, path: r.path }));
    const i429 = times.findIndex((t) => t.path.endsWith('/51005'));
    expect(i429).toBeGreaterThanOrEqual(0);
    const after = times.slice(i429 + 1);
    expect(after.length).toBeGreaterThan(0);
    // Measured, not assumed: the hold is set promptly, and once it is in force nothing reaches the
    // API for Retry-After. Requests the other process started before then (its next jobs) may
    // land; 100 ms covers one already on its way when the hold was seen.
    const t429 = times[i429]!.at;
    expect(held, 'the hold was never set').toBeDefined();
    expect(held! - t429).toBeLessThan(1000);
    const inForce = held! + 100;
    const inWindow = after.filter((t) => t.at >= inForce && t.at - t429 < 1900);
    expect(inWindow).toEqual([]);
    const resumed = after.find((t) => t.at >= inForce)!;
    expect(resumed.at - t429).toBeGreaterThanOrEqual(1900);
    const failed = (await q.queue.getJobCounts('failed')).failed;
    expect(failed).toBe(0);
    a.process.kill('SIGTERM');
    b.process.kill('SIGTERM');
    expect((await a.done).code).toBe(0);
    expect((await b.done).code).toBe(0);
  });

  it('SIGTERM finishes in-flight jobs, then exits 0', async () => {
    // A deadline well past the 700 ms answers: a worker still starting up (the SIGTERM may come
    // before it has logged its start) can take a while to read them on a busy machine.
    const q = setup({ CARDS_API_TIMEOUT_MS: '5000' });
    const ids = [52_000, 52_001, 52_002, 52_003];
    for (const id of ids) upstream.script.set(`id:${id}`, { ...ok(cardsFor(id)), delayMs: 700 });
    await enqueueSyncs(
      q.queue,
      ids.map((subscriberId) => ({ subscriberId })),
      'manual',
    );
    const w = q.worker('--concurrency', '4');
    await waitFor('four active jobs', async () => (await q.queue.getJobCounts('active')).active === 4);
    w.process.kill('SIGTERM');
    const result = await w.done;
    expect(result.code).toBe(0);
    expect((await q.queue.getJobCounts('completed')).completed).toBe(4);
    expect(
      await countRows(
        sql`select count(*)::int as n from sync_runs where subscriber_id between 52000 and 52003 and status = 'succeeded'`,
      ),
    ).toBe(4);
  });

  it('SIGKILL mid-job: the job runs again in another worker and the data ends right', async () => {
    const q = setup();
    const id = 53_000;
    upstream.script.set(`id:${id}`, (n) =>
      n === 1 ? { ...ok(cardsFor(id)), delayMs: 5000 } : ok(cardsFor(id)),
    );
    await enqueueSyncs(q.queue, [{ subscriberId: id }], 'manual');
    const doomed = q.worker('--concurrency', '1');
    await waitFor('the job to start', async () => upstream.calls.get(`id:${id}`) === 1);
    doomed.process.kill('SIGKILL');
    await doomed.done;
    const rescuer = q.worker('--concurrency', '1');
    await waitFor(
      'the job to complete elsewhere',
      async () => (await q.queue.getJobCounts('completed')).completed === 1,
      30_000,
    );
    expect(await countRows(sql`select count(*)::int as n from saved_cards where subscriber_id = ${id}`)).toBe(
      cardsFor(id).length,
    );
    expect(
      await countRows(sql`select count(*)::int as n from saved_card_changes where subscriber_id = ${id}`),
    ).toBe(cardsFor(id).length);
    rescuer.process.kill('SIGTERM');
    expect((await rescuer.done).code).toBe(0);
  }, 45_000);

  it('warns when Redis may evict jobs', async () => {
    const q = setup();
    const w = q.worker('--exit-when-idle');
    const result = await w.done;
    expect(result.code).toBe(0);
    const policy = ((await q.redis.config('GET', 'maxmemory-policy')) as string[])[1];
    if (policy === 'noeviction') expect(result.stderr).not.toContain('maxmemory-policy');
    else expect(result.stderr).toContain('maxmemory-policy');
  });
});
