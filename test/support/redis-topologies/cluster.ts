import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  type Auth,
  at,
  CLUSTER_SLOTS,
  command,
  commonArgs,
  HOST,
  type HostPort,
  killServer,
  type Launch,
  makeTempDir,
  messageOf,
  type Note,
  parseInfo,
  passwordArgs,
  replicationOf,
  type ServerProcess,
  startAll,
  startServer,
  stopServers,
  TIMEOUT_MS,
  waitFor,
  withRedis,
} from './servers.js';

// ---------------------------------------------------------------------------------------------
// Redis Cluster

/** A 3-master, 3-replica Redis Cluster on free loopback ports in a temp dir. */
export interface RedisClusterHandle {
  /** All six nodes, in start order (the same objects the methods below return). */
  nodes: HostPort[];
  /** The current master serving `key`'s slot (ask CLUSTER SLOTS / CLUSTER KEYSLOT of a live node). */
  masterOf(key: string): Promise<HostPort>;
  /**
   * Runs CLUSTER FAILOVER on a replica of `key`'s master; resolves once that replica reports role
   * master, every live node maps the slot to it and the old master replicates from it.
   */
  failover(key: string): Promise<{ oldMaster: HostPort; newMaster: HostPort }>;
  /**
   * SIGKILLs `key`'s master; resolves once a replica took over its slots (cluster_state:ok again
   * and the slot mapped to the new master, as seen by every live node).
   */
  killMasterOf(key: string): Promise<{ killed: HostPort; newMaster: HostPort }>;
  /**
   * Restarts a node killed before (same port, same nodes.conf), as a replica that rejoins; resolves
   * once it replicates with its link up and no live node flags it as failing.
   */
  restart(node: HostPort): Promise<void>;
  /** Kills every process, removes the temp dir; safe to call more than once. */
  stop(): Promise<void>;
}

interface ClusterNodeEntry {
  id: string;
  port: number;
  flags: string[];
  masterId: string;
  slots: string[];
}

/** Flags that make a node unfit: failing, suspected, still joining, or without an address. */
const UNHEALTHY_FLAGS = new Set(['fail', 'fail?', 'handshake', 'noaddr']);

function parseClusterNodes(reply: unknown): ClusterNodeEntry[] {
  return String(reply)
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const fields = line.trim().split(' ');
      return {
        id: fields[0] ?? '',
        port: Number(/:(\d+)@/.exec(fields[1] ?? '')?.[1]),
        flags: (fields[2] ?? '').split(','),
        masterId: fields[3] ?? '-',
        slots: fields.slice(8),
      };
    });
}

/** The port of the master serving `slot` in a CLUSTER SLOTS reply, if any. */
function slotOwner(reply: unknown, slot: number): number | undefined {
  if (!Array.isArray(reply)) throw new Error(`unexpected CLUSTER SLOTS reply: ${String(reply)}`);
  for (const entry of reply as unknown[]) {
    if (!Array.isArray(entry)) continue;
    const [start, end, master] = entry as unknown[];
    if (Number(start) <= slot && slot <= Number(end) && Array.isArray(master)) return Number(master[1]);
  }
  return undefined;
}

const execFileAsync = promisify(execFile);

export async function startRedisCluster(options: { password?: string } = {}): Promise<RedisClusterHandle> {
  const dir = makeTempDir('cluster');
  const auth: Auth = { password: options.password };
  /** The process currently behind each port. */
  const servers = new Map<number, ServerProcess>();
  /** Every process started, restarts included, for stop(). */
  const everStarted: ServerProcess[] = [];
  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= stopServers(everStarted, dir);
    return stopping;
  };

  const launch = (port: number): Launch => {
    const logFile = join(dir, `node-${port}.log`);
    return {
      logFile,
      args: [
        '--port',
        String(port),
        ...commonArgs(dir, logFile),
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        `nodes-${port}.conf`,
        // Short, so a SIGKILLed master is failed over in a few seconds.
        '--cluster-node-timeout',
        '2000',
        // A replica always stands for election, however long it has been cut off from its master.
        '--cluster-replica-validity-factor',
        '0',
        ...passwordArgs(options.password),
      ],
    };
  };

  const live = (): HostPort[] => [...servers.values()].filter((s) => s.alive).map((s) => s.node);
  const nodeAt = (port: number): HostPort => servers.get(port)?.node ?? { host: HOST, port };

  async function fromAnyLive<T>(what: string, ask: (node: HostPort) => Promise<T>): Promise<T> {
    let last: unknown = 'no live node';
    for (const node of live()) {
      try {
        return await ask(node);
      } catch (error) {
        last = error;
      }
    }
    throw new Error(`no live cluster node answered ${what}: ${messageOf(last)}`);
  }

  async function keySlot(key: string): Promise<number> {
    return Number(
      await fromAnyLive('CLUSTER KEYSLOT', (node) => command(node, auth, 'CLUSTER', 'KEYSLOT', key)),
    );
  }

  async function masterOfSlot(slot: number): Promise<HostPort> {
    const port = await fromAnyLive('CLUSTER SLOTS', async (node) =>
      slotOwner(await command(node, auth, 'CLUSTER', 'SLOTS'), slot),
    );
    if (port === undefined) throw new Error(`no master serves slot ${slot}`);
    return nodeAt(port);
  }

  /** The port serving `slot` when every live node agrees on it; else false. */
  async function agreedOwner(slot: number, note: Note): Promise<number | false> {
    let agreed: number | undefined;
    for (const node of live()) {
      const owner = slotOwner(await command(node, auth, 'CLUSTER', 'SLOTS'), slot);
      if (owner === undefined) return note(`${at(node)} sees no master for slot ${slot}`);
      if (agreed !== undefined && owner !== agreed) {
        return note(`nodes disagree on slot ${slot}: ${HOST}:${agreed} and ${HOST}:${owner}`);
      }
      agreed = owner;
    }
    return agreed ?? note('no live node');
  }

  /**
   * True when the cluster is at rest: three live masters own every slot and every other live node
   * is a replica with its link up (by their own INFO), and every live node reports cluster_state:ok
   * with all slots covered, knows all six nodes, and sees each live node healthy, in its own role
   * and (for a replica) under its own master.
   */
  async function settled(note: Note): Promise<boolean> {
    const liveNodes = live();
    const roles = new Map<number, { master: boolean; masterPort: number }>();
    for (const node of liveNodes) {
      const replication = await replicationOf(node, auth);
      const master = replication.role === 'master';
      if (!master && replication.master_link_status !== 'up') {
        return note(`replica ${at(node)} has master_link_status:${replication.master_link_status}`);
      }
      roles.set(node.port, { master, masterPort: Number(replication.master_port) });
    }
    const masters = [...roles.values()].filter((r) => r.master).length;
    if (masters !== 3) return note(`${masters} live nodes report role:master, not 3`);
    for (const node of liveNodes) {
      const ok = await withRedis(node, auth, async (redis) => {
        const info = parseInfo(await redis.call('CLUSTER', 'INFO'));
        if (info.cluster_state !== 'ok' || info.cluster_slots_ok !== String(CLUSTER_SLOTS)) {
          return note(
            `${at(node)} reports cluster_state:${info.cluster_state}, cluster_slots_ok:${info.cluster_slots_ok}`,
          );
        }
        if (info.cluster_known_nodes !== '6')
          return note(`${at(node)} knows ${info.cluster_known_nodes} nodes`);
        const view = parseClusterNodes(await redis.call('CLUSTER', 'NODES'));
        const portOf = new Map(view.map((e) => [e.id, e.port]));
        for (const entry of view) {
          const own = roles.get(entry.port);
          if (!own) continue; // a killed node
          const seen = `${at(node)} sees ${HOST}:${entry.port} as ${entry.flags.join(',')}`;
          if (entry.flags.some((f) => UNHEALTHY_FLAGS.has(f))) return note(seen);
          if (own.master !== entry.flags.includes('master')) return note(seen);
          if (!own.master && portOf.get(entry.masterId) !== own.masterPort) {
            return note(`${seen} of ${HOST}:${portOf.get(entry.masterId)}, not of ${HOST}:${own.masterPort}`);
          }
        }
        const owners = view.filter((e) => e.slots.length > 0);
        if (owners.length !== 3 || owners.some((e) => !roles.get(e.port)?.master)) {
          return note(`${at(node)} sees slots owned by ${owners.map((e) => `${HOST}:${e.port}`).join(', ')}`);
        }
        return true;
      });
      if (!ok) return false;
    }
    return true;
  }

  const handle: RedisClusterHandle = {
    nodes: [],
    async masterOf(key) {
      return masterOfSlot(await keySlot(key));
    },

    async failover(key) {
      const slot = await keySlot(key);
      const oldMaster = await masterOfSlot(slot);
      const replica = await withRedis(oldMaster, auth, async (redis) => {
        const view = parseClusterNodes(await redis.call('CLUSTER', 'NODES'));
        const me = view.find((e) => e.flags.includes('myself'));
        return view.find(
          (e) =>
            e.masterId === me?.id &&
            e.flags.includes('slave') &&
            !e.flags.some((f) => UNHEALTHY_FLAGS.has(f)) &&
            servers.get(e.port)?.alive,
        );
      });
      if (!replica)
        throw new Error(`failover(${key}): master ${at(oldMaster)} of slot ${slot} has no live replica`);
      const newMaster = nodeAt(replica.port);
      await command(newMaster, auth, 'CLUSTER', 'FAILOVER');
      let askedAt = Date.now();
      await waitFor(
        `replica ${at(newMaster)} to report role:master after CLUSTER FAILOVER (slot ${slot} of ${at(oldMaster)})`,
        async (note) => {
          const role = (await replicationOf(newMaster, auth)).role;
          if (role === 'master') return true;
          // A manual failover is abandoned after 5 s (replica not caught up in time): ask again.
          if (Date.now() - askedAt > 6000) {
            askedAt = Date.now();
            await command(newMaster, auth, 'CLUSTER', 'FAILOVER');
          }
          return note(`role:${role}`);
        },
      );
      await waitFor(
        `every node to map slot ${slot} to ${at(newMaster)} and ${at(oldMaster)} to replicate from it`,
        async (note) => {
          const owner = await agreedOwner(slot, note);
          if (owner !== newMaster.port) return owner && note(`slot ${slot} still served by ${HOST}:${owner}`);
          return settled(note);
        },
      );
      return { oldMaster, newMaster };
    },

    async killMasterOf(key) {
      const slot = await keySlot(key);
      const killed = await masterOfSlot(slot);
      const server = servers.get(killed.port);
      if (!server?.alive) throw new Error(`killMasterOf(${key}): master ${at(killed)} is not a running node`);
      await killServer(server);
      const port = await waitFor(
        `a replica to take over slot ${slot} from SIGKILLed master ${at(killed)} (cluster_state:ok on every live node)`,
        async (note) => {
          const owner = await agreedOwner(slot, note);
          if (owner === false) return false;
          if (owner === killed.port) return note(`slot ${slot} still mapped to the killed master`);
          return (await settled(note)) && owner;
        },
      );
      return { killed, newMaster: nodeAt(port) };
    },

    async restart(node) {
      const old = servers.get(node.port);
      if (!old) throw new Error(`restart(${at(node)}): not a node of this cluster`);
      if (old.alive) throw new Error(`restart(${at(node)}): the node is still running`);
      const server = await startServer({
        what: `cluster node ${at(node)} (restart)`,
        launch,
        auth,
        bus: true,
        node: old.node,
      });
      everStarted.push(server);
      servers.set(node.port, server);
      await waitFor(
        `restarted node ${at(node)} to rejoin the cluster as a replica with its link up`,
        async (note) => {
          const role = (await replicationOf(node, auth)).role;
          if (role !== 'slave') return note(`${at(node)} reports role:${role}`);
          return settled(note);
        },
      );
    },

    stop,
  };

  try {
    const started = await startAll(
      Array.from({ length: 6 }, (_, i) => ({ what: `cluster node ${i + 1}`, launch, auth, bus: true })),
      everStarted,
    );
    for (const server of started) servers.set(server.node.port, server);
    handle.nodes = started.map((s) => s.node);
    const cli = [
      ...(options.password ? ['-a', options.password, '--no-auth-warning'] : []),
      '--cluster',
      'create',
      ...handle.nodes.map(at),
      '--cluster-replicas',
      '1',
      '--cluster-yes',
    ];
    try {
      await execFileAsync('redis-cli', cli, { timeout: TIMEOUT_MS });
    } catch (error) {
      const { stdout = '', stderr = '' } = error as { stdout?: string; stderr?: string };
      throw new Error(`redis-cli --cluster create failed: ${messageOf(error)}\n${stdout}${stderr}`.trim());
    }
    await waitFor(
      'the new cluster to settle (cluster_state:ok on all six nodes, 3 masters, 3 synced replicas)',
      settled,
    );
    return handle;
  } catch (error) {
    await stop();
    throw error;
  }
}
