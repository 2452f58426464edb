import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { useScriptedApi } from '../support/fixtures.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';
import {
  type RedisClusterHandle,
  redisServerAvailable,
  type SentinelGroupHandle,
  startRedisCluster,
  startSentinelGroup,
  startTlsRedis,
  type TlsRedisHandle,
} from '../support/redis-topologies.js';
import { exerciseTopology } from '../support/redis-topology-flow.js';

// The whole path (enqueue → worker → rows, pause and resume with status, a 429, a refresh with its
// tally) on each Redis topology the factory supports, each started by the test on loopback ports.

const database = useTestDatabase();
const upstream = useScriptedApi();
const { logger } = captureLogger('info');

describe('on a single Redis node', () => {
  it('enqueue → worker → rows, pause/resume with status, a 429, the scheduler, a refresh with its tally and a promotion, Bull Board', async () => {
    const url = inject('redisUrl');
    await exerciseTopology({
      redis: { url, topology: 'single' },
      env: { REDIS_URL: url },
      database,
      upstream,
      logger,
      base: 100_000,
    });
  }, 120_000);
});

const list = (nodes: { host: string; port: number }[]) => nodes.map((n) => `${n.host}:${n.port}`).join(',');
const PASSWORD = 'topology-pass-5c1e77';

describe.skipIf(!redisServerAvailable())(
  'on a Redis Cluster of 3 masters and 3 replicas, with a password',
  () => {
    let cluster: RedisClusterHandle | undefined;
    beforeAll(async () => {
      cluster = await startRedisCluster({ password: PASSWORD });
    }, 90_000);
    afterAll(() => cluster?.stop());

    it('enqueue → worker → rows, pause/resume with status, a 429, the scheduler, a refresh with its tally and a promotion, Bull Board', async () => {
      const url = `redis://:${PASSWORD}@127.0.0.1:6379`;
      // Two seed nodes are enough: the client discovers the rest.
      const seeds = cluster!.nodes.slice(0, 2);
      await exerciseTopology({
        redis: { url, topology: 'cluster', clusterNodes: seeds },
        env: { REDIS_URL: url, REDIS_CLUSTER_NODES: list(seeds) },
        database,
        upstream,
        logger,
        base: 200_000,
      });
    }, 120_000);
  },
);

describe.skipIf(!redisServerAvailable())(
  'through Sentinel (a primary, a replica, three Sentinels), with passwords',
  () => {
    let group: SentinelGroupHandle | undefined;
    beforeAll(async () => {
      group = await startSentinelGroup({ password: PASSWORD, sentinelPassword: `${PASSWORD}-s` });
    }, 90_000);
    afterAll(() => group?.stop());

    it('enqueue → worker → rows, pause/resume with status, a 429, the scheduler, a refresh with its tally and a promotion, Bull Board', async () => {
      const url = `redis://:${PASSWORD}@127.0.0.1:6379`;
      await exerciseTopology({
        redis: {
          url,
          topology: 'sentinel',
          sentinels: group!.sentinels,
          sentinelName: group!.name,
          sentinelPassword: `${PASSWORD}-s`,
        },
        env: {
          REDIS_URL: url,
          REDIS_SENTINELS: list(group!.sentinels),
          REDIS_SENTINEL_NAME: group!.name,
          REDIS_SENTINEL_PASSWORD: `${PASSWORD}-s`,
        },
        database,
        upstream,
        logger,
        base: 300_000,
      });
    }, 120_000);
  },
);

describe.skipIf(!redisServerAvailable())(
  'on a Redis reached over TLS (rediss: and REDIS_TLS_CA_FILE)',
  () => {
    let tls: TlsRedisHandle | undefined;
    beforeAll(async () => {
      tls = await startTlsRedis({ password: PASSWORD });
    }, 60_000);
    afterAll(() => tls?.stop());

    it('enqueue → worker → rows, pause/resume with status, a 429, the scheduler, a refresh with its tally and a promotion, Bull Board', async () => {
      const url = `rediss://:${PASSWORD}@localhost:${tls!.port}`;
      const { readFileSync } = await import('node:fs');
      await exerciseTopology({
        redis: { url, topology: 'single', tlsCa: readFileSync(tls!.caFile, 'utf8') },
        env: { REDIS_URL: url, REDIS_TLS_CA_FILE: tls!.caFile },
        database,
        upstream,
        logger,
        base: 400_000,
      });
    }, 120_000);

    it('refuses a server its CA file did not sign: status exits 1 naming Redis, and leaks no password', async () => {
      const { runCli } = await import('../support/queue-helpers.js');
      const run = await runCli(['status'], {
        REDIS_URL: `rediss://:${PASSWORD}@localhost:${tls!.port}`,
        REDIS_TLS_CA_FILE: tls!.otherCaFile,
        DATABASE_URL: database.url,
      });
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(/cannot reach Redis at localhost:\d+/);
      expect(run.stderr + run.stdout).not.toContain(PASSWORD);
    });
  },
);
