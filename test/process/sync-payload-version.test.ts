import { describe, expect, inject, it } from 'vitest';
import { newerPayload } from '../../jobs/sync/index.js';
import { isOpsJob } from '../../jobs/sync/lanes.js';
import { JOB_NAME } from '../../jobs/sync/queue.js';
import { makeCard, ok, useScriptedApi, workerEnv } from '../support/fixtures.js';
import { useCleanups, useTestDatabase } from '../support/helpers.js';
import { startCli, testQueue, waitFor } from '../support/queue-helpers.js';

// Versioned job payloads: a worker hands back a payload from a newer release
// unused, and reads one from a release before versions in its old lane.

const database = useTestDatabase();
const upstream = useScriptedApi();
const cleanups = useCleanups();

describe('versioned job payloads', () => {
  it('a payload from a newer release is handed back, no attempt used and no request spent; an unversioned one is synced', async () => {
    const q = testQueue();
    cleanups.push(q.cleanup);
    upstream.script.set('id:7101', ok([makeCard(7101)]));
    upstream.script.set('id:7102', ok([makeCard(7102)]));
    const future = await q.queue.add(
      JOB_NAME,
      { v: 99, target: { subscriberId: 7101 }, trigger: 'manual', somethingNew: { x: 1 } } as never,
      { jobId: 'id:7101:future', attempts: 3 },
    );
    const old = await q.queue.add(
      JOB_NAME,
      { target: { subscriberId: 7102 }, trigger: 'manual' },
      {
        jobId: 'id:7102:old',
        attempts: 3,
      },
    );
    const worker = startCli(
      ['worker'],
      workerEnv(
        { databaseUrl: database.url, redisUrl: inject('redisUrl'), prefix: q.prefix, apiUrl: upstream.url },
        { LOG_LEVEL: 'warn' },
      ),
    );
    cleanups.push(async () => {
      if (worker.process.exitCode === null) worker.process.kill('SIGKILL');
      await worker.done;
    });
    await waitFor(
      'the old payload synced',
      async () => (await q.queue.getJob(old.id!))?.finishedOn !== undefined,
      20_000,
    );
    expect(await (await q.queue.getJob(old.id!))!.getState()).toBe('completed');
    await waitFor(
      'the newer payload handed back',
      async () => (await (await q.queue.getJob(future.id!))!.getState()) === 'delayed',
      20_000,
    );
    const handedBack = (await q.queue.getJob(future.id!))!;
    expect(handedBack.attemptsMade).toBe(0);
    expect(handedBack.failedReason ?? '').toBe('');
    expect(handedBack.data).toMatchObject({ v: 99, somethingNew: { x: 1 } });
    const runs = await database.handle.pool.query<{ subscriber_id: string }>(
      'select subscriber_id from sync_runs order by id',
    );
    expect(runs.rows.map((r) => Number(r.subscriber_id))).toEqual([7102]);
    expect(upstream.mock.requests.some((r) => r.path.endsWith('/7101'))).toBe(false);
    worker.process.kill('SIGTERM');
    const done = await worker.done;
    expect(done.code).toBe(0);
    expect(done.stdout + done.stderr).toContain('a job from a newer release: handed back for a newer worker');
  });

  it('reads the version, and keeps an unversioned refresh job in the refresh lane', () => {
    expect(newerPayload({ v: 2 }, 1)).toBe(2);
    expect(newerPayload({ v: 1 }, 1)).toBeUndefined();
    expect(newerPayload({}, 1)).toBeUndefined();
    expect(newerPayload({ v: '9' }, 1)).toBeUndefined();
    expect(newerPayload(null, 1)).toBeUndefined();
    expect(isOpsJob({ target: { subscriberId: 1 }, trigger: 'nightly', refreshRunId: 4 })).toBe(false);
    expect(isOpsJob({ target: { subscriberId: 1 }, trigger: 'manual' })).toBe(true);
  });
});
