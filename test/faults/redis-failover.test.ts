import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { RedisConfig } from '../../src/config/redis.js';
import { useCleanups, useTestDatabase } from '../support/helpers.js';
import { waitFor } from '../support/queue-helpers.js';
import { redisServerAvailable, startRedisCluster, startSentinelGroup } from '../support/redis-topologies.js';
import { type Scenario, startScenario } from './scenario.js';

// Redis failovers while two workers sync thousands of subscribers: the master of the queue's slot
// failed over on a Redis Cluster (CLUSTER FAILOVER, then SIGKILL), and a Sentinel-managed primary
// killed. The workers carry on; nothing is lost or duplicated, no job fails, no secret is logged.
// Each row of the report says how long syncs stopped landing around the failover.

const database = useTestDatabase();
const cleanups = useCleanups();
const SUBSCRIBERS = Number(process.env.FAULTS_SUBSCRIBERS ?? 20_000) / 4;
const list = (nodes: { host: string; port: number }[]) => nodes.map((n) => `${n.host}:${n.port}`).join(',');

/**
 * Samples how many syncs have landed in Postgres every 50 ms; `stop()` returns the longest time no
 * new sync landed after `from` (the moment the fault was injected).
 */
function watchLandings(s: Scenario, firstId: number) {
  const pool = database.handle.pool;
  let last = -1;
  let from: number | undefined;
  const changes: number[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const r = await pool.query<{ n: number }>(
        'select count(*)::int as n from sync_runs where subscriber_id between $1 and $2',
        [firstId, firstId + s.ids.length - 1],
      );
      const n = r.rows[0]!.n;
      if (n !== last && from !== undefined) changes.push(Date.now());
      last = n;
      await sleep(50);
    }
  })();
  return {
    mark: () => {
      from = Date.now();
    },
    landed: () => last,
    stop: async () => {
      running = false;
      await loop;
      const times = [from ?? Date.now(), ...changes];
      let longest = 0;
      for (let i = 1; i < times.length; i++) longest = Math.max(longest, times[i]! - times[i - 1]!);
      return longest;
    },
  };
}

async function runScenario(options: {
  redis: RedisConfig;
  env: Record<string, string>;
  firstId: number;
  inject: (tag: string) => Promise<string>;
  name: string;
}) {
  const s = await startScenario({
    db: database,
    cleanups,
    subscribers: SUBSCRIBERS,
    firstId: options.firstId,
    apiArgs: ['--latency-ms', '5'],
    redisUrl: options.redis,
    env: options.env,
  });
  const workers = [s.startWorker('--concurrency', '16'), s.startWorker('--concurrency', '16')];
  await waitFor('both workers started', async () =>
    workers.every((w) => /worker started/.test(w.stdout() + w.stderr())),
  );
  const watch = watchLandings(s, options.firstId);
  await waitFor('a tenth of the subscribers synced', async () => watch.landed() >= SUBSCRIBERS / 10, 60_000);
  watch.mark();
  const what = await options.inject(s.env.QUEUE_PREFIX!);
  await s.drained(240_000, workers);
  const stallMs = await watch.stop();
  expect(stallMs).toBeGreaterThan(0);
  await s.finish(workers, {
    scenario: options.name,
    faults: `${what}; syncs stopped landing for ${(stallMs / 1000).toFixed(1)} s at most`,
    faultCount: 1,
  });
}

describe.skipIf(!redisServerAvailable())('Redis failovers', () => {
  it('Redis Cluster: CLUSTER FAILOVER of the master of the queue’s slot', async () => {
    const cluster = await startRedisCluster();
    cleanups.push(() => cluster.stop());
    await runScenario({
      name: 'Redis Cluster failover',
      redis: { url: 'redis://127.0.0.1:6379', topology: 'cluster', clusterNodes: cluster.nodes },
      env: { REDIS_CLUSTER_NODES: list(cluster.nodes.slice(0, 3)) },
      firstId: 7_000_000,
      inject: async (tag) => {
        const { oldMaster, newMaster } = await cluster.failover(tag);
        return `CLUSTER FAILOVER of the queue's master ${oldMaster.port} to ${newMaster.port} (3 masters, 3 replicas)`;
      },
    });
  }, 300_000);

  it('Redis Cluster: the master of the queue’s slot killed (SIGKILL), a replica takes over', async () => {
    const cluster = await startRedisCluster();
    cleanups.push(() => cluster.stop());
    await runScenario({
      name: 'Redis Cluster master killed',
      redis: { url: 'redis://127.0.0.1:6379', topology: 'cluster', clusterNodes: cluster.nodes },
      env: { REDIS_CLUSTER_NODES: list(cluster.nodes) },
      firstId: 7_100_000,
      inject: async (tag) => {
        const { killed, newMaster } = await cluster.killMasterOf(tag);
        return `SIGKILL of the queue's master ${killed.port}; replica ${newMaster.port} promoted`;
      },
    });
  }, 300_000);

  it('Sentinel: the primary killed (SIGKILL), the Sentinels promote the replica', async () => {
    const group = await startSentinelGroup();
    cleanups.push(() => group.stop());
    await runScenario({
      name: 'Sentinel primary killed',
      redis: {
        url: 'redis://127.0.0.1:6379',
        topology: 'sentinel',
        sentinels: group.sentinels,
        sentinelName: group.name,
      },
      env: { REDIS_SENTINELS: list(group.sentinels), REDIS_SENTINEL_NAME: group.name },
      firstId: 7_200_000,
      inject: async () => {
        const { killed, newPrimary } = await group.killPrimary();
        return `SIGKILL of the primary ${killed.port}; the Sentinels promoted ${newPrimary.port}`;
      },
    });
  }, 300_000);
});
