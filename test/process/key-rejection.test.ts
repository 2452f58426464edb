import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, inject, it } from 'vitest';
import { enqueueSyncs, queueIsIdle } from '../../jobs/sync/index.js';
import { apiKeyFingerprint } from '../../src/api/client.js';
import { liveFleet } from '../../src/fleet/index.js';
import { packageVersion } from '../../src/shared/index.js';
import { adminFor } from '../support/admin-helpers.js';
import { API_KEY, useScriptedApi, workerEnv } from '../support/fixtures.js';
import { useCleanups, useTestDatabase } from '../support/helpers.js';
import {
  type CliProcess,
  type CliRun,
  runCli,
  startCli,
  testQueue,
  waitFor,
} from '../support/queue-helpers.js';

// a worker whose API key the API rejects, in a fleet whose other workers hold a
// key that works, stops itself and names itself; the queue is not paused. When its key is the only
// one (no other key known to work), the queue is paused for everyone, naming the process and key.
// Real worker processes, against a mock API that accepts API_KEY and refuses any other.

const database = useTestDatabase();
const upstream = useScriptedApi({ latencyMs: 25 });
const cleanups = useCleanups();
const WRONG_KEY = '0b7e1c55-1d2e-4f3a-9b8c-7d6e5f4a3b2c';
const pool = () => database.handle.pool;

function started(args: string[], env: Record<string, string>): CliProcess {
  const p = startCli(args, env);
  cleanups.push(async () => {
    if (p.process.exitCode === null && p.process.signalCode === null) p.process.kill('SIGKILL');
    await p.done;
  });
  return p;
}

/** The process's exit, or a failure after `ms`: a worker that does not stop would hang the test. */
async function exitOf(p: CliProcess, ms: number): Promise<CliRun> {
  const late = sleep(ms).then(() => {
    throw new Error(`the worker did not exit within ${ms} ms:\n${p.stderr().slice(-2000)}`);
  });
  return Promise.race([p.done, late]);
}

const ids = (from: number, n: number) => Array.from({ length: n }, (_, i) => ({ subscriberId: from + i }));

async function auditRows(action: string) {
  const { rows } = await pool().query<{ actor: string; source: string; detail: Record<string, unknown> }>(
    'select actor, source, detail from admin_actions where action = $1 order by id',
    [action],
  );
  return rows;
}

describe('a rejected API key', () => {
  it('of one worker in a fleet whose key works: that worker stops itself and names itself; the queue goes on', async () => {
    const q = testQueue();
    cleanups.push(q.cleanup);
    const env = workerEnv({
      databaseUrl: database.url,
      redisUrl: inject('redisUrl'),
      prefix: q.prefix,
      apiUrl: upstream.url,
    });
    await enqueueSyncs(q.queue, ids(8_100_000, 30), 'manual');
    const good = started(['worker', '--concurrency', '2'], env);
    await waitFor(
      'the good worker syncing',
      async () =>
        (
          await pool().query<{ n: number }>(
            `select count(*)::int as n from sync_runs where status = 'succeeded' and subscriber_id >= 8100000`,
          )
        ).rows[0]!.n >= 5,
      30_000,
    );
    const bad = started(['worker', '--concurrency', '4'], { ...env, CARDS_API_KEY: WRONG_KEY });
    await waitFor('both in the fleet', async () => (await liveFleet(pool())).length === 2, 20_000);
    await enqueueSyncs(q.queue, ids(8_100_100, 300), 'manual');

    const run = await exitOf(bad, 30_000);
    expect(run.code, run.stderr).toBe(2);
    const fp = apiKeyFingerprint(WRONG_KEY);
    const goodFp = apiKeyFingerprint(API_KEY);
    expect(run.stderr).toContain(`rejected this worker's API key ${fp} (HTTP 401)`);
    expect(run.stderr).toContain(`key ${goodFp} works for other live workers`);
    expect(run.stderr).toContain(`pid ${bad.process.pid}`);
    expect(await q.queue.isPaused()).toBe(false);
    // Gone from the fleet: it left as it stopped.
    expect((await liveFleet(pool())).map((p) => p.pid)).toEqual([good.process.pid]);

    const json = JSON.parse((await runCli(['status', '--json'], env)).stdout) as {
      queue: { paused: boolean; rejectedKeys: Record<string, unknown>[] };
    };
    expect(json.queue.paused).toBe(false);
    expect(json.queue.rejectedKeys).toEqual([
      {
        fingerprint: fp,
        httpStatus: 401,
        process: {
          id: expect.any(String),
          host: hostname(),
          pid: bad.process.pid,
          version: packageVersion(),
        },
        at: expect.any(String),
        scope: 'process',
        workingKeys: [goodFp],
      },
    ]);
    const text = (await runCli(['status'], env)).stdout;
    expect(text).toContain(': running');
    expect(text).toMatch(
      new RegExp(
        `API KEY REJECTED .*\\n {4}key ${fp} \\(HTTP 401\\) of worker \\S+ on ${hostname()}, pid ${bad.process.pid}, .*it stopped itself`,
      ),
    );
    const [row] = await auditRows('key_rejected');
    expect(row?.detail).toMatchObject({
      scope: 'process',
      rejectedKey: { fingerprint: fp, process: { pid: bad.process.pid, host: hostname() } },
      workingKeys: [goodFp],
    });
    const overview = await adminFor(database, q, cleanups)('/admin');
    expect(overview).toMatch(new RegExp(`id="rejected-keys".*key ${fp} .*pid ${bad.process.pid}`, 's'));

    // The good worker finishes everything: no job failed, the bad worker's jobs went back unused.
    await waitFor('the queue to drain', () => queueIsIdle(q.queue), 60_000);
    expect(await q.queue.getJobCounts('failed')).toEqual({ failed: 0 });
    const { rows } = await pool().query<{ n: number }>(
      `select count(distinct subscriber_id)::int as n from sync_runs where status = 'succeeded' and subscriber_id >= 8100000`,
    );
    expect(rows[0]!.n).toBe(330);
    good.process.kill('SIGTERM');
    const goodRun = await good.done;
    expect(goodRun.code).toBe(0);
    const everything = [run.stdout, run.stderr, goodRun.stdout, goodRun.stderr, JSON.stringify(json), text];
    for (const s of [...everything, JSON.stringify(await auditRows('key_rejected')), overview]) {
      expect(s).not.toContain(WRONG_KEY);
      expect(s).not.toContain(API_KEY);
    }
  }, 120_000);

  it('that is the only key in use: the queue pauses for everyone, naming the process and its key everywhere', async () => {
    const q = testQueue();
    cleanups.push(q.cleanup);
    const env = workerEnv(
      { databaseUrl: database.url, redisUrl: inject('redisUrl'), prefix: q.prefix, apiUrl: upstream.url },
      { CARDS_API_KEY: WRONG_KEY },
    );
    await enqueueSyncs(q.queue, ids(8_200_000, 5), 'manual');
    const bad = started(['worker', '--exit-when-idle'], env);
    const run = await exitOf(bad, 30_000);
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toContain('the queue is paused (auth_rejected');
    const fp = apiKeyFingerprint(WRONG_KEY);
    const pid = bad.process.pid!;
    // The log line names the key and the process.
    const logs = run.stdout + run.stderr;
    expect(logs).toContain(`"keyFingerprint":"${fp}"`);
    expect(logs).toMatch(
      new RegExp(`The rejected key: key ${fp} \\(HTTP 401\\) of worker \\S+ on \\S+, pid ${pid}`),
    );
    expect((await q.queue.getJobCounts('waiting')).waiting).toBe(5);

    const json = JSON.parse((await runCli(['status', '--json'], env)).stdout) as {
      queue: { paused: boolean; pausedBy: string; pause: Record<string, unknown> };
    };
    const rejectedKey = {
      fingerprint: fp,
      httpStatus: 401,
      process: { id: expect.any(String), host: hostname(), pid, version: packageVersion() },
    };
    expect(json.queue).toMatchObject({ paused: true, pausedBy: 'auth_rejected', pause: { rejectedKey } });
    const text = (await runCli(['status'], env)).stdout;
    expect(text).toMatch(
      new RegExp(
        `paused by auth_rejected at [^\\n]*\\n(?: {4}[^\\n]*\\n)* {4}the rejected key: key ${fp} \\(HTTP 401\\) of worker \\S+ on ${hostname()}, pid ${pid}, `,
      ),
    );
    const [paused] = await auditRows('pause');
    expect(paused?.detail).toMatchObject({
      by: 'auth_rejected',
      rejectedKey: { fingerprint: fp, process: { pid } },
    });
    const overview = await adminFor(database, q, cleanups)('/admin');
    expect(overview).toMatch(
      new RegExp(`id="pause-details">.*the rejected key: key ${fp} .*pid ${pid}`, 's'),
    );

    expect((await runCli(['resume'], env)).code).toBe(0);
    const [resumed] = await auditRows('resume');
    expect(resumed?.detail).toMatchObject({
      endedPauseBy: 'auth_rejected',
      endedPauseRejectedKey: { fingerprint: fp, process: { pid } },
    });
    for (const s of [logs, JSON.stringify(json), text, overview, JSON.stringify([paused, resumed])]) {
      expect(s).not.toContain(WRONG_KEY);
    }
  }, 60_000);
});
