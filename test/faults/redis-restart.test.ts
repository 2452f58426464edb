import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { expect, it } from 'vitest';
import { freePort } from '../../src/demo/local-servers.js';
import { useCleanups, useTestDatabase } from '../support/helpers.js';
import { waitFor } from '../support/queue-helpers.js';
import { startScenario } from './scenario.js';

// A private Redis (its own port, AOF on) is restarted while two workers sync: they reconnect and
// finish, and nothing is lost.

const database = useTestDatabase();
const cleanups = useCleanups();
const SUBSCRIBERS = Number(process.env.FAULTS_SUBSCRIBERS ?? 20_000) / 4;

function startRedis(port: number, dir: string): ChildProcess {
  return spawn(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--dir',
      dir,
      '--appendonly',
      'yes',
      '--appendfsync',
      'everysec',
      '--save',
      '',
      '--maxmemory-policy',
      'noeviction',
    ],
    { stdio: 'ignore' },
  );
}

async function answers(url: string): Promise<boolean> {
  const r = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  r.on('error', () => {});
  try {
    await r.connect();
    return (await r.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    r.disconnect();
  }
}

it('Redis restart: workers reconnect and finish; nothing lost', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cards-sync-redis-'));
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  let redis = startRedis(port, dir);
  cleanups.push(async () => {
    if (redis.exitCode === null) {
      redis.kill('SIGKILL');
      await once(redis, 'exit');
    }
    rmSync(dir, { recursive: true, force: true });
  });
  await waitFor('the private Redis', () => answers(url));

  const s = await startScenario({
    db: database,
    cleanups,
    subscribers: SUBSCRIBERS,
    firstId: 6_000_000,
    apiArgs: ['--latency-ms', '5'],
    redisUrl: url,
  });
  const workers = [s.startWorker('--concurrency', '16'), s.startWorker('--concurrency', '16')];
  // Both running before Redis goes: a worker still starting when it is down exits, as it should
  // (a CI run on a loaded machine once took longer than a fixed 1.5 s to start one).
  await waitFor('both workers started', async () =>
    workers.every((w) => /worker started/.test(w.stdout() + w.stderr())),
  );
  await sleep(300);
  expect((await s.queue.getJobCounts('waiting')).waiting).toBeGreaterThan(0);
  // A clean restart: SIGTERM makes Redis flush its AOF, then it starts again from it.
  redis.kill('SIGTERM');
  await once(redis, 'exit');
  await sleep(1000);
  redis = startRedis(port, dir);
  await waitFor('the private Redis again', () => answers(url));

  await s.finish(workers, {
    scenario: 'Redis restart',
    faults: '1 × Redis stopped for 1 s and restarted from its AOF',
    faultCount: 1,
  });
});
