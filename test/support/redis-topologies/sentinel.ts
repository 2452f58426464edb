import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type Auth,
  at,
  command,
  commonArgs,
  HOST,
  type HostPort,
  killServer,
  type Launch,
  makeTempDir,
  passwordArgs,
  replicationOf,
  type ServerProcess,
  startAll,
  stopServers,
  waitFor,
  withRedis,
} from './servers.js';

// ---------------------------------------------------------------------------------------------
// Sentinel

/** A primary, one replica and three Sentinels (quorum 2), master name `mymaster` unless given. */
export interface SentinelGroupHandle {
  name: string;
  sentinels: HostPort[];
  /** The current primary (updated by killPrimary). */
  primary: HostPort;
  /** The other data node: the replica at first; after killPrimary, the killed (down) former primary. */
  replica: HostPort;
  /**
   * SIGKILLs the current primary; resolves once the Sentinels report the replica as the new master
   * (SENTINEL get-master-addr-by-name, on every Sentinel) and it reports role:master. Works once.
   */
  killPrimary(): Promise<{ killed: HostPort; newPrimary: HostPort }>;
  /** Kills every process, removes the temp dir; safe to call more than once. */
  stop(): Promise<void>;
}

/** A reply of flat `[field, value, …]` pairs (SENTINEL sentinels/replicas entries) as a record. */
function pairs(reply: unknown): Record<string, string> {
  const fields: Record<string, string> = {};
  if (!Array.isArray(reply)) return fields;
  const items = reply as unknown[];
  for (let i = 0; i + 1 < items.length; i += 2) fields[String(items[i])] = String(items[i + 1]);
  return fields;
}

/** A string in redis.conf syntax. */
function confString(value: string): string {
  return `"${value.replace(/[\\"]/g, '\\$&')}"`;
}

export async function startSentinelGroup(
  options: { name?: string; password?: string; sentinelPassword?: string } = {},
): Promise<SentinelGroupHandle> {
  const name = options.name ?? 'mymaster';
  const dir = makeTempDir('sentinel');
  const dataAuth: Auth = { password: options.password };
  const sentinelAuth: Auth = { password: options.sentinelPassword };
  const servers: ServerProcess[] = [];
  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= stopServers(servers, dir);
    return stopping;
  };

  const dataLaunch =
    (replicaOf?: number) =>
    (port: number): Launch => {
      const logFile = join(dir, `redis-${port}.log`);
      return {
        logFile,
        args: [
          '--port',
          String(port),
          ...commonArgs(dir, logFile),
          ...passwordArgs(options.password),
          ...(replicaOf ? ['--replicaof', HOST, String(replicaOf)] : []),
        ],
      };
    };

  try {
    const [primary] = await startAll(
      [{ what: 'Sentinel group primary', launch: dataLaunch(), auth: dataAuth }],
      servers,
    );
    const primaryPort = primary!.node.port;
    const [replica] = await startAll(
      [{ what: 'Sentinel group replica', launch: dataLaunch(primaryPort), auth: dataAuth }],
      servers,
    );
    const primaryNode = primary!.node;
    const replicaNode = replica!.node;
    // Before the Sentinels start: their first INFO of the primary must list the replica, or they
    // would learn of it only at the next INFO, 10 s later, and could not fail over until then.
    await waitFor(`replica ${at(replicaNode)} to sync with primary ${at(primaryNode)}`, async (note) => {
      const info = await replicationOf(primaryNode, dataAuth);
      if (info.connected_slaves !== '1' || !info.slave0?.includes('state=online')) {
        return note(`primary reports connected_slaves:${info.connected_slaves} slave0:${info.slave0 ?? ''}`);
      }
      const link = (await replicationOf(replicaNode, dataAuth)).master_link_status;
      return link === 'up' || note(`replica reports master_link_status:${link}`);
    });

    const sentinelLaunch = (port: number): Launch => {
      const logFile = join(dir, `sentinel-${port}.log`);
      const conf = join(dir, `sentinel-${port}.conf`);
      const lines = [
        `port ${port}`,
        `bind ${HOST}`,
        'daemonize no',
        `dir ${confString(dir)}`,
        `logfile ${confString(logFile)}`,
        'sentinel resolve-hostnames no',
        `sentinel monitor ${name} ${HOST} ${primaryPort} 2`,
        `sentinel down-after-milliseconds ${name} 1000`,
        `sentinel failover-timeout ${name} 5000`,
        ...(options.password ? [`sentinel auth-pass ${name} ${confString(options.password)}`] : []),
        ...(options.sentinelPassword
          ? [
              `requirepass ${confString(options.sentinelPassword)}`,
              `sentinel sentinel-pass ${confString(options.sentinelPassword)}`,
            ]
          : []),
      ];
      writeFileSync(conf, `${lines.join('\n')}\n`);
      return { logFile, args: [conf, '--sentinel'] };
    };
    const sentinels = await startAll(
      [1, 2, 3].map((i) => ({ what: `Sentinel ${i}`, launch: sentinelLaunch, auth: sentinelAuth })),
      servers,
    );

    await waitFor(
      `the three Sentinels to monitor ${name} at ${at(primaryNode)}, see its replica ${at(replicaNode)} and each other`,
      async (note) => {
        for (const { node } of sentinels) {
          const ok = await withRedis(node, sentinelAuth, async (redis) => {
            const master = await redis.call('SENTINEL', 'get-master-addr-by-name', name);
            if (!Array.isArray(master) || Number(master[1]) !== primaryPort) {
              return note(`Sentinel ${at(node)} reports master ${JSON.stringify(master)}`);
            }
            const others = await redis.call('SENTINEL', 'sentinels', name);
            if (!Array.isArray(others) || others.length !== 2) {
              return note(
                `Sentinel ${at(node)} knows ${Array.isArray(others) ? others.length : 0} other Sentinels`,
              );
            }
            const replicas = await redis.call('SENTINEL', 'replicas', name);
            const known = Array.isArray(replicas) ? (replicas as unknown[]).map(pairs) : [];
            const fit = known.find(
              (r) =>
                Number(r.port) === replicaNode.port &&
                r.flags === 'slave' &&
                r['master-link-status'] === 'ok',
            );
            return (
              Boolean(fit) ||
              note(`Sentinel ${at(node)} sees replicas ${JSON.stringify(known.map((r) => r.flags))}`)
            );
          });
          if (!ok) return false;
        }
        return true;
      },
    );

    const byNode = (node: HostPort) => servers.find((s) => s.node === node);
    const handle: SentinelGroupHandle = {
      name,
      sentinels: sentinels.map((s) => s.node),
      primary: primaryNode,
      replica: replicaNode,
      async killPrimary() {
        const killed = byNode(handle.primary);
        const promoted = byNode(handle.replica);
        if (!killed?.alive)
          throw new Error(`killPrimary(): the primary ${at(handle.primary)} is not running`);
        if (!promoted?.alive) {
          throw new Error(
            `killPrimary(): the replica ${at(handle.replica)} is down (killPrimary works once)`,
          );
        }
        await killServer(killed);
        await waitFor(
          `the Sentinels to report ${at(promoted.node)} as master of ${name} after SIGKILLing ${at(killed.node)}`,
          async (note) => {
            for (const s of sentinels) {
              const master = await command(s.node, sentinelAuth, 'SENTINEL', 'get-master-addr-by-name', name);
              if (!Array.isArray(master) || Number(master[1]) !== promoted.node.port) {
                return note(`Sentinel ${at(s.node)} reports master ${JSON.stringify(master)}`);
              }
            }
            return true;
          },
        );
        await waitFor(`${at(promoted.node)} to report role:master`, async (note) => {
          const role = (await replicationOf(promoted.node, dataAuth)).role;
          return role === 'master' || note(`role:${role}`);
        });
        handle.primary = promoted.node;
        handle.replica = killed.node;
        return { killed: killed.node, newPrimary: promoted.node };
      },
      stop,
    };
    return handle;
  } catch (error) {
    await stop();
    throw error;
  }
}
