import { readFileSync } from 'node:fs';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type HostPort,
  type RedisClusterHandle,
  redisServerAvailable,
  type SentinelGroupHandle,
  startRedisCluster,
  startSentinelGroup,
  startTlsRedis,
  type TlsRedisHandle,
} from '../support/redis-topologies.js';

// The harness in redis-topologies.ts starts real Redis topologies; these tests prove each one
// works the way tests elsewhere will use it.

const AVAILABLE = redisServerAvailable();
if (!AVAILABLE) console.warn('redis-topologies tests skipped: redis-server or redis-cli is not on PATH');
const PASSWORD = 'topology-secret';
const SENTINEL_PASSWORD = 'sentinel-secret';

/** A plain connection to one node, closed after `use`. */
async function onNode<T>(node: HostPort, use: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis({ ...node, password: PASSWORD, lazyConnect: true, retryStrategy: () => null });
  redis.on('error', () => {});
  try {
    await redis.connect();
    return await use(redis);
  } finally {
    redis.disconnect();
  }
}

describe.skipIf(!AVAILABLE)(
  AVAILABLE ? 'redis topologies' : 'redis topologies (skipped: redis-server or redis-cli is not on PATH)',
  () => {
    describe('Redis Cluster', () => {
      let cluster: RedisClusterHandle;
      let client: Cluster;

      beforeAll(async () => {
        cluster = await startRedisCluster({ password: PASSWORD });
        client = new Cluster([cluster.nodes[0]!], { redisOptions: { password: PASSWORD } });
      });
      afterAll(async () => {
        client?.disconnect();
        await cluster?.stop();
        await cluster?.stop(); // idempotent
      });

      it('starts six nodes and serves keys of different slots from different masters', async () => {
        expect(cluster.nodes).toHaveLength(6);
        const keys = ['{a}', '{b}', '{c}', '{d}', '{e}', '{f}'];
        for (const key of keys) await client.set(`${key}:v`, key);
        for (const key of keys) expect(await client.get(`${key}:v`)).toBe(key);
        const masters = new Set((await Promise.all(keys.map((k) => cluster.masterOf(k)))).map((m) => m.port));
        expect(masters.size).toBeGreaterThan(1);
        for (const port of masters) expect(cluster.nodes.map((n) => n.port)).toContain(port);
      });

      it('failover() hands a slot to its replica and the data stays', async () => {
        await client.set('{k}:v', 'before failover');
        const before = await cluster.masterOf('{k}');
        const { oldMaster, newMaster } = await cluster.failover('{k}');
        expect(oldMaster).toEqual(before);
        expect(newMaster).not.toEqual(oldMaster);
        expect(await cluster.masterOf('{k}')).toEqual(newMaster);
        expect(await onNode(newMaster, (r) => r.get('{k}:v'))).toBe('before failover');
        expect(await client.get('{k}:v')).toBe('before failover');
        await client.set('{k}:v', 'after failover');
        expect(await client.get('{k}:v')).toBe('after failover');
      }, 45_000);

      it('killMasterOf() promotes a replica; restart() brings the node back as its replica', async () => {
        const master = await cluster.masterOf('{x}');
        await onNode(master, async (r) => {
          await r.set('{x}:v', 'kept');
          expect(await r.call('WAIT', 1, 5000)).toBe(1); // on the replica before the master dies
        });
        const { killed, newMaster } = await cluster.killMasterOf('{x}');
        expect(killed).toEqual(master);
        expect(newMaster).not.toEqual(killed);
        expect(await cluster.masterOf('{x}')).toEqual(newMaster);
        expect(await client.get('{x}:v')).toBe('kept');
        await client.set('{x}:v', 'written after the kill');

        await cluster.restart(killed);
        const replication = await onNode(killed, (r) => r.info('replication'));
        expect(replication).toContain('role:slave');
        expect(replication).toContain(`master_port:${newMaster.port}`);
        await onNode(newMaster, (r) => r.call('WAIT', 1, 5000));
        expect(
          await onNode(killed, async (r) => {
            await r.call('READONLY');
            return r.get('{x}:v');
          }),
        ).toBe('written after the kill');
      }, 75_000);
    });

    describe('Sentinel group', () => {
      let group: SentinelGroupHandle;
      let client: Redis;

      beforeAll(async () => {
        group = await startSentinelGroup({ password: PASSWORD, sentinelPassword: SENTINEL_PASSWORD });
        client = new Redis({
          sentinels: group.sentinels,
          name: group.name,
          password: PASSWORD,
          sentinelPassword: SENTINEL_PASSWORD,
          retryStrategy: () => 100,
        });
        client.on('error', () => {});
      });
      afterAll(async () => {
        client?.disconnect();
        await group?.stop();
        await group?.stop(); // idempotent
      });

      it('serves reads and writes through the Sentinels', async () => {
        expect(group.name).toBe('mymaster');
        expect(group.sentinels).toHaveLength(3);
        await client.set('s:v', 'one');
        expect(await client.get('s:v')).toBe('one');
        expect(await onNode(group.primary, (r) => r.get('s:v'))).toBe('one');
      });

      it('killPrimary() promotes the replica and the same client keeps working', async () => {
        const { primary, replica } = group;
        expect(await client.call('WAIT', 1, 5000)).toBe(1);
        const { killed, newPrimary } = await group.killPrimary();
        expect(killed).toEqual(primary);
        expect(newPrimary).toEqual(replica);
        expect(group.primary).toEqual(newPrimary);
        expect(await client.get('s:v')).toBe('one');
        await client.set('s:v', 'two');
        expect(await onNode(newPrimary, (r) => r.get('s:v'))).toBe('two');
        expect(await onNode(newPrimary, (r) => r.info('replication'))).toContain('role:master');
      }, 45_000);
    });

    describe('TLS-only Redis', () => {
      let server: TlsRedisHandle;

      beforeAll(async () => {
        server = await startTlsRedis({ password: PASSWORD });
      });
      afterAll(async () => {
        await server?.stop();
        await server?.stop(); // idempotent
      });

      /** A TLS connection to the server trusting only `caFile`, checked for `servername`; `errors` collects its errors. */
      function tlsClient(caFile: string, servername?: string, errors: Error[] = []): Redis {
        const redis = new Redis({
          host: '127.0.0.1',
          port: server.port,
          password: PASSWORD,
          tls: { ca: readFileSync(caFile), servername },
          lazyConnect: true,
          maxRetriesPerRequest: 0,
          retryStrategy: () => null,
        });
        redis.on('error', (error: Error) => errors.push(error));
        return redis;
      }

      it('answers PING for a client trusting its CA, by IP and by name', async () => {
        for (const servername of [undefined, 'localhost']) {
          const redis = tlsClient(server.caFile, servername);
          try {
            await redis.connect();
            expect(await redis.ping()).toBe('PONG');
          } finally {
            redis.disconnect();
          }
        }
      });

      it('is refused by a client trusting another CA', async () => {
        const errors: Error[] = [];
        const redis = tlsClient(server.otherCaFile, undefined, errors);
        try {
          await expect(redis.connect()).rejects.toThrow();
          // ioredis rejects with "Connection is closed."; the TLS error itself comes as an 'error' event.
          expect(errors.map((e) => e.message).join('; ')).toMatch(/certificate/i);
        } finally {
          redis.disconnect();
        }
      });
    });
  },
);
