import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { ConfigError } from '../shared/index.js';
import { blankToUndefined, type VariableSpec } from './schemas.js';

/** A `host:port` of a Sentinel or a cluster seed node. */
export interface HostPort {
  host: string;
  port: number;
}

/**
 * Where Redis is and how to reach it (docs/configuration.md): one node, a Sentinel group or a Cluster.
 * `url` (`REDIS_URL`) always gives the data nodes' user, password and scheme (`rediss:` = TLS);
 * with Sentinel or Cluster its host and port are not used.
 */
export interface RedisConfig {
  url: string;
  topology: 'single' | 'sentinel' | 'cluster';
  /** `REDIS_SENTINELS`. */
  sentinels?: HostPort[];
  /** `REDIS_SENTINEL_NAME`: the master name the Sentinels watch. */
  sentinelName?: string;
  /** `REDIS_SENTINEL_PASSWORD`: the Sentinels' own password; a secret. */
  sentinelPassword?: string;
  /** `REDIS_CLUSTER_NODES`: seed nodes; the rest is discovered. */
  clusterNodes?: HostPort[];
  /** The PEM text of `REDIS_TLS_CA_FILE`, read at start. */
  tlsCa?: string;
}

/** `host:port[,host:port…]`: a host name, IPv4, or [IPv6], and a port from 1 to 65535. */
function parseHostPorts(raw: string): HostPort[] | undefined {
  const out: HostPort[] = [];
  for (const item of raw.split(',')) {
    const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]{1,253}):(\d{1,5})$/.exec(item.trim());
    if (!m) return undefined;
    const port = Number(m[2]);
    if (port < 1 || port > 65_535) return undefined;
    out.push({ host: m[1]!.replace(/^\[|\]$/g, ''), port });
  }
  return out.length > 0 ? out : undefined;
}

const hostPorts = z.preprocess(
  blankToUndefined,
  z
    .string()
    .refine((v) => parseHostPorts(v) !== undefined)
    .optional(),
);

/** The Redis variables beside `REDIS_URL`, in the form of config.ts's table. */
export const redisVariables = {
  REDIS_SENTINELS: {
    schema: hostPorts,
    expect: 'a comma-separated list of host:port, such as sentinel-1:26379,sentinel-2:26379',
    echo: true,
    fleet: 'shared',
  },
  REDIS_SENTINEL_NAME: {
    schema: z.preprocess(
      blankToUndefined,
      z
        .string()
        .regex(/^[\w.-]{1,128}$/)
        .optional(),
    ),
    expect: 'the master name the Sentinels watch, such as mymaster (letters, digits, _ . -)',
    echo: true,
    fleet: 'shared',
  },
  REDIS_SENTINEL_PASSWORD: {
    schema: z.preprocess(blankToUndefined, z.string().optional()),
    expect: 'a password',
    echo: false,
    fleet: 'own',
  },
  REDIS_CLUSTER_NODES: {
    schema: hostPorts,
    expect: 'a comma-separated list of host:port, such as redis-1:6379,redis-2:6379',
    echo: true,
    fleet: 'shared',
  },
  REDIS_TLS_CA_FILE: {
    schema: z.preprocess(blankToUndefined, z.string().optional()),
    expect: 'a file path',
    echo: true,
    fleet: 'own',
  },
} as const satisfies Record<string, VariableSpec>;

function readCa(path: string): string {
  let pem: string;
  try {
    pem = readFileSync(path, 'utf8');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? 'unreadable';
    throw new ConfigError(
      `REDIS_TLS_CA_FILE names a file that cannot be read (${reason}): ${path}`,
      'REDIS_TLS_CA_FILE',
    );
  }
  if (!pem.includes('-----BEGIN CERTIFICATE-----')) {
    throw new ConfigError(
      `REDIS_TLS_CA_FILE must hold PEM certificates (-----BEGIN CERTIFICATE-----): ${path}`,
      'REDIS_TLS_CA_FILE',
    );
  }
  return pem;
}

/**
 * The Redis topology from the parsed variables; refuses combinations that cannot work, with one line
 * naming the variable (never a password).
 */
export function redisTopology(e: {
  url: string;
  queuePrefix: string;
  REDIS_SENTINELS?: string | undefined;
  REDIS_SENTINEL_NAME?: string | undefined;
  REDIS_SENTINEL_PASSWORD?: string | undefined;
  REDIS_CLUSTER_NODES?: string | undefined;
  REDIS_TLS_CA_FILE?: string | undefined;
}): RedisConfig {
  if (e.REDIS_SENTINELS !== undefined && e.REDIS_CLUSTER_NODES !== undefined) {
    throw new ConfigError(
      'set REDIS_SENTINELS (Sentinel) or REDIS_CLUSTER_NODES (Cluster), not both: a Redis is one or the other',
      'REDIS_SENTINELS',
    );
  }
  if (e.REDIS_SENTINELS !== undefined && e.REDIS_SENTINEL_NAME === undefined) {
    throw new ConfigError(
      'REDIS_SENTINELS is set but REDIS_SENTINEL_NAME is not: set it to the master name the Sentinels watch (e.g. mymaster)',
      'REDIS_SENTINEL_NAME',
    );
  }
  if (e.REDIS_SENTINELS === undefined && (e.REDIS_SENTINEL_NAME ?? e.REDIS_SENTINEL_PASSWORD) !== undefined) {
    const name = e.REDIS_SENTINEL_NAME !== undefined ? 'REDIS_SENTINEL_NAME' : 'REDIS_SENTINEL_PASSWORD';
    throw new ConfigError(
      `${name} is set but REDIS_SENTINELS is not: list the Sentinels as host:port,host:port`,
      name,
    );
  }
  if (e.REDIS_CLUSTER_NODES !== undefined && !/\{[^{}]+\}/.test(e.queuePrefix)) {
    throw new ConfigError(
      `on Redis Cluster QUEUE_PREFIX must hold a {hash tag} so that every key of the queue lives in one slot, such as {cards-sync} (got ${JSON.stringify(e.queuePrefix)})`,
      'QUEUE_PREFIX',
    );
  }
  const tls = new URL(e.url).protocol === 'rediss:';
  if (e.REDIS_TLS_CA_FILE !== undefined && !tls) {
    throw new ConfigError(
      'REDIS_TLS_CA_FILE is set but REDIS_URL is not rediss:, so no TLS would be used: write REDIS_URL as rediss://…',
      'REDIS_TLS_CA_FILE',
    );
  }
  const config: RedisConfig = { url: e.url, topology: 'single' };
  if (e.REDIS_TLS_CA_FILE !== undefined) config.tlsCa = readCa(e.REDIS_TLS_CA_FILE);
  if (e.REDIS_SENTINELS !== undefined) {
    config.topology = 'sentinel';
    config.sentinels = parseHostPorts(e.REDIS_SENTINELS)!;
    config.sentinelName = e.REDIS_SENTINEL_NAME!;
    if (e.REDIS_SENTINEL_PASSWORD !== undefined) config.sentinelPassword = e.REDIS_SENTINEL_PASSWORD;
  }
  if (e.REDIS_CLUSTER_NODES !== undefined) {
    config.topology = 'cluster';
    config.clusterNodes = parseHostPorts(e.REDIS_CLUSTER_NODES)!;
  }
  return config;
}
