import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { ConfigError } from '../../src/shared/index.js';
import { runCli } from '../support/queue-helpers.js';

// The Redis topology variables (docs/configuration.md): Sentinel, Cluster and TLS, and the combinations refused.

const dir = mkdtempSync(join(tmpdir(), 'cards-sync-config-redis-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const PEM = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
const SENTINEL_PASSWORD = 'sentinel-secret-7d1f0c';
const DATA_PASSWORD = 'data-secret-93ab21';

function refusal(env: Record<string, string>, variable: string): string {
  try {
    loadConfig(env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    const e = error as ConfigError;
    expect(e.variable).toBe(variable);
    expect(e.message).toContain(variable);
    expect(e.message).not.toMatch(/[\r\n]/);
    for (const secret of [SENTINEL_PASSWORD, DATA_PASSWORD]) expect(e.message).not.toContain(secret);
    return e.message;
  }
  throw new Error(`accepted ${JSON.stringify(env)}`);
}

describe('Redis topology', () => {
  it('a single node by default, from REDIS_URL', () => {
    expect(loadConfig({ REDIS_URL: 'redis://cache:6380/2' }).redis).toEqual({
      url: 'redis://cache:6380/2',
      topology: 'single',
    });
  });

  it('Sentinel: the list, the master name and the Sentinels’ password; REDIS_URL keeps the data nodes’ password', () => {
    const c = loadConfig({
      REDIS_URL: `redis://:${DATA_PASSWORD}@ignored:6379`,
      REDIS_SENTINELS: 's1:26379, s2:26380,[::1]:26381',
      REDIS_SENTINEL_NAME: 'mymaster',
      REDIS_SENTINEL_PASSWORD: SENTINEL_PASSWORD,
    }).redis;
    expect(c).toEqual({
      url: `redis://:${DATA_PASSWORD}@ignored:6379`,
      topology: 'sentinel',
      sentinels: [
        { host: 's1', port: 26379 },
        { host: 's2', port: 26380 },
        { host: '::1', port: 26381 },
      ],
      sentinelName: 'mymaster',
      sentinelPassword: SENTINEL_PASSWORD,
    });
  });

  it('Cluster: seed nodes, a hash-tagged prefix, TLS with a CA file', () => {
    const ca = join(dir, 'ca.pem');
    writeFileSync(ca, PEM);
    const c = loadConfig({
      REDIS_URL: 'rediss://default:pw@ignored:6379',
      REDIS_CLUSTER_NODES: 'r1.internal:6379,r2.internal:6379',
      QUEUE_PREFIX: '{cards-sync}',
      REDIS_TLS_CA_FILE: ca,
    }).redis;
    expect(c).toMatchObject({
      topology: 'cluster',
      clusterNodes: [
        { host: 'r1.internal', port: 6379 },
        { host: 'r2.internal', port: 6379 },
      ],
      tlsCa: PEM,
    });
  });

  it('refuses Sentinel and Cluster together', () => {
    expect(
      refusal(
        {
          REDIS_SENTINELS: 's1:26379',
          REDIS_SENTINEL_NAME: 'mymaster',
          REDIS_CLUSTER_NODES: 'r1:6379',
          QUEUE_PREFIX: '{x}',
        },
        'REDIS_SENTINELS',
      ),
    ).toContain('not both');
  });

  it('refuses a Sentinel list without a name, and a name or password without a list', () => {
    expect(refusal({ REDIS_SENTINELS: 's1:26379' }, 'REDIS_SENTINEL_NAME')).toContain('master name');
    refusal({ REDIS_SENTINEL_NAME: 'mymaster' }, 'REDIS_SENTINEL_NAME');
    refusal({ REDIS_SENTINEL_PASSWORD: SENTINEL_PASSWORD }, 'REDIS_SENTINEL_PASSWORD');
  });

  it.each(['s1', 's1:', ':26379', 's1:0', 's1:70000', 's1:26379,,s2:26379', 's1:26379 s2:26379', 'a b:1'])(
    'refuses the malformed host:port list %j',
    (bad) => {
      expect(refusal({ REDIS_SENTINELS: bad, REDIS_SENTINEL_NAME: 'm' }, 'REDIS_SENTINELS')).toContain(
        'host:port',
      );
      refusal({ REDIS_CLUSTER_NODES: bad, QUEUE_PREFIX: '{x}' }, 'REDIS_CLUSTER_NODES');
    },
  );

  it('refuses a Cluster with a QUEUE_PREFIX that has no {hash tag}', () => {
    expect(refusal({ REDIS_CLUSTER_NODES: 'r1:6379' }, 'QUEUE_PREFIX')).toContain('{hash tag}');
    refusal({ REDIS_CLUSTER_NODES: 'r1:6379', QUEUE_PREFIX: 'cards-sync{}' }, 'QUEUE_PREFIX');
  });

  it('refuses a CA file without rediss:, a missing one, and one that holds no certificate', () => {
    const ca = join(dir, 'ok.pem');
    writeFileSync(ca, PEM);
    expect(refusal({ REDIS_TLS_CA_FILE: ca }, 'REDIS_TLS_CA_FILE')).toContain('rediss:');
    expect(
      refusal(
        { REDIS_URL: 'rediss://c:6379', REDIS_TLS_CA_FILE: join(dir, 'nope.pem') },
        'REDIS_TLS_CA_FILE',
      ),
    ).toContain('ENOENT');
    const junk = join(dir, 'junk.pem');
    writeFileSync(junk, 'not a certificate');
    expect(refusal({ REDIS_URL: 'rediss://c:6379', REDIS_TLS_CA_FILE: junk }, 'REDIS_TLS_CA_FILE')).toContain(
      'PEM',
    );
  });

  it('a command refuses a bad combination at start: one line naming the variable, exit 2, no password', async () => {
    const run = await runCli(['status'], {
      REDIS_URL: `redis://:${DATA_PASSWORD}@127.0.0.1:6379`,
      REDIS_SENTINELS: '127.0.0.1:26379',
      REDIS_SENTINEL_PASSWORD: SENTINEL_PASSWORD,
    });
    expect(run.code).toBe(2);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
    expect(run.stderr).toContain('REDIS_SENTINEL_NAME');
    expect(run.stderr + run.stdout).not.toContain(SENTINEL_PASSWORD);
    expect(run.stderr + run.stdout).not.toContain(DATA_PASSWORD);
  });
});
