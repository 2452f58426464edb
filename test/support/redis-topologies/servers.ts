import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ConnectionOptions } from 'node:tls';
import { Redis } from 'ioredis';

// Real Redis topologies on loopback for tests: a 3+3 Redis Cluster, a primary and replica watched by
// three Sentinels, and a TLS-only server. Every server is a `redis-server --daemonize no` child of
// this process, bound to 127.0.0.1 on random free ports in 20000–40000, working in its own temp dir
// (data, nodes.conf, sentinel.conf, one log file per server).
//
// Persistence is off everywhere (`--save "" --appendonly no`): a cluster node that `restart()` brings
// back has lost its slots to its replica, so it rejoins as a replica and full-syncs from its new
// master; it needs nothing of its own but its nodes.conf, which Redis Cluster writes regardless.
//
// Nothing outlives the test run: `stop()` kills and removes everything (and may be called again);
// if a test never calls it, an `exit` handler SIGKILLs whatever is left; and if this process dies
// without running that handler (SIGKILL, a vitest worker torn down), a tiny reaper process that
// holds a pipe from this one sees the pipe close and kills the servers it was told about.

export interface HostPort {
  host: string;
  port: number;
}

export const HOST = '127.0.0.1';
/** Bound on every wait: starting a server, a cluster forming, a failover. */
export const TIMEOUT_MS = 30_000;
export const CLUSTER_SLOTS = 16_384;

let available: boolean | undefined;

/** True when redis-server and redis-cli are on PATH (tests skip with a clear message otherwise). */
export function redisServerAvailable(): boolean {
  available ??= ['redis-server', 'redis-cli'].every((tool) => {
    const result = spawnSync(tool, ['--version'], { stdio: 'ignore', timeout: 10_000 });
    return result.error === undefined && result.status === 0;
  });
  return available;
}

// ---------------------------------------------------------------------------------------------
// Child processes, temp dirs and their cleanup

const children = new Set<ChildProcess>();
const tempDirs = new Set<string>();

/** Kills the pids it was given (`+pid`, `-pid` when gone) and removes the dirs (`Ddir`, `ddir`) once stdin closes. */
const REAPER_SCRIPT = `
export const { rmSync } = require('node:fs');
export const pids = new Set();
export const dirs = new Set();
let rest = '';
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => {});
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  const lines = (rest + chunk).split('\\n');
  rest = lines.pop();
  for (const line of lines) {
    const value = line.slice(1);
    if (line[0] === '+') pids.add(Number(value));
    else if (line[0] === '-') pids.delete(Number(value));
    else if (line[0] === 'D') dirs.add(value);
    else if (line[0] === 'd') dirs.delete(value);
  }
});
process.stdin.on('end', () => {
  for (const pid of pids) try { process.kill(pid, 'SIGKILL'); } catch {}
  for (const dir of dirs) try { rmSync(dir, { recursive: true, force: true }); } catch {}
});
`;

let reaper: ChildProcess | undefined;

function tellReaper(line: string): void {
  if (!reaper) {
    reaper = spawn(process.execPath, ['-e', REAPER_SCRIPT], {
      stdio: ['pipe', 'ignore', 'ignore'],
      detached: true,
      env: { PATH: process.env.PATH ?? '' },
    });
    reaper.on('error', () => {});
    reaper.stdin?.on('error', () => {});
    reaper.unref();
    if (reaper.stdin instanceof Socket) reaper.stdin.unref();
  }
  reaper.stdin?.write(`${line}\n`);
}

process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
  for (const dir of tempDirs) {
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // The reaper tries again once this process is gone.
    }
  }
});

export function makeTempDir(kind: string): string {
  const dir = mkdtempSync(join(tmpdir(), `cards-sync-redis-${kind}-`));
  tempDirs.add(dir);
  tellReaper(`D${dir}`);
  return dir;
}

function removeTempDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  tempDirs.delete(dir);
  tellReaper(`d${dir}`);
}

// ---------------------------------------------------------------------------------------------
// Ports

/** Ports handed out by this process and not yet given back, so concurrent starts never share one. */
const reservedPorts = new Set<number>();

function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ port, host: HOST, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/** A random port in 20000–40000 that binds on 127.0.0.1 (and, with `bus`, port+10000 too), reserved. */
async function reservePorts(bus: boolean): Promise<number[]> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 20_001);
    const ports = bus ? [port, port + 10_000] : [port];
    if (ports.some((p) => reservedPorts.has(p))) continue;
    for (const p of ports) reservedPorts.add(p);
    let free = true;
    for (const p of ports) free &&= await canBind(p);
    if (free) return ports;
    releasePorts(ports);
  }
  throw new Error(`no free loopback port${bus ? ' pair (port and port+10000)' : ''} found in 20000–40000`);
}

function releasePorts(ports: number[]): void {
  for (const p of ports) reservedPorts.delete(p);
}

// ---------------------------------------------------------------------------------------------
// Short-lived connections and waiting

export interface Auth {
  password?: string | undefined;
  tls?: ConnectionOptions | undefined;
}

export function at(node: HostPort): string {
  return `${node.host}:${node.port}`;
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Opens one connection to `node`, runs `use`, and closes it whatever happens. */
export async function withRedis<T>(
  node: HostPort,
  auth: Auth,
  use: (redis: Redis) => Promise<T>,
): Promise<T> {
  const redis = new Redis({
    host: node.host,
    port: node.port,
    password: auth.password,
    tls: auth.tls,
    lazyConnect: true,
    enableReadyCheck: false,
    enableOfflineQueue: false,
    connectTimeout: 2000,
    commandTimeout: 5000,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  redis.on('error', () => {});
  try {
    await redis.connect();
    return await use(redis);
  } finally {
    redis.disconnect();
  }
}

export function command(
  node: HostPort,
  auth: Auth,
  name: string,
  ...args: (string | number)[]
): Promise<unknown> {
  return withRedis(node, auth, (redis) => redis.call(name, ...args));
}

/** `INFO`-style text (`key:value` lines) as a record. */
export function parseInfo(reply: unknown): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const line of String(reply).split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon > 0 && !line.startsWith('#')) fields[line.slice(0, colon)] = line.slice(colon + 1);
  }
  return fields;
}

export async function replicationOf(node: HostPort, auth: Auth): Promise<Record<string, string>> {
  return parseInfo(await command(node, auth, 'INFO', 'replication'));
}

/** Records the state seen last, for the timeout message; always false, so `return note(…)` fails a check. */
export type Note = (state: string) => false;

/** Polls `check` until it returns something truthy; after `timeoutMs` fails naming `what` and the last state seen. */
export async function waitFor<T>(
  what: string,
  check: (note: Note) => Promise<T | false | undefined>,
  timeoutMs = TIMEOUT_MS,
): Promise<T> {
  const started = Date.now();
  let last = '';
  const note: Note = (state) => {
    last = state;
    return false;
  };
  for (;;) {
    try {
      const value = await check(note);
      if (value) return value;
    } catch (error) {
      last = messageOf(error);
    }
    if (Date.now() - started > timeoutMs) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last seen: ${last})` : ''}`,
      );
    }
    await sleep(100);
  }
}

// ---------------------------------------------------------------------------------------------
// redis-server processes

export interface Launch {
  args: string[];
  logFile: string;
}

export interface ServerProcess {
  node: HostPort;
  /** Ports reserved for it (its port, and the cluster bus port for cluster nodes). */
  ports: number[];
  child: ChildProcess;
  alive: boolean;
  exitStatus: string;
  /** Resolves once the process has exited. */
  exited: Promise<void>;
}

export interface StartSpec {
  /** Names the server in errors, e.g. `cluster node 3`. */
  what: string;
  launch: (port: number) => Launch;
  auth: Auth;
  /** Cluster nodes also need port+10000 free, for the cluster bus. */
  bus?: boolean;
  /** Restart on this node's port (no retry on another port). */
  node?: HostPort;
}

/** Arguments every server gets: loopback only, no persistence, no daemon, its own dir and log. */
export function commonArgs(dir: string, logFile: string): string[] {
  return [
    '--bind',
    HOST,
    '--daemonize',
    'no',
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    dir,
    '--logfile',
    logFile,
    // Replicas sync at once instead of after the default 5 s diskless-sync delay.
    '--repl-diskless-sync-delay',
    '0',
  ];
}

function logTail(logFile: string, lines = 12): string {
  if (!existsSync(logFile)) return '(no log written)';
  return readFileSync(logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
}

function spawnServer(node: HostPort, ports: number[], launch: Launch): ServerProcess {
  const child = spawn('redis-server', launch.args, { stdio: 'ignore' });
  const { promise: exited, resolve: resolveExited } = Promise.withResolvers<void>();
  const server: ServerProcess = { node, ports, child, alive: true, exitStatus: '', exited };
  children.add(child);
  if (child.pid) tellReaper(`+${child.pid}`);
  const gone = (status: string) => {
    if (!server.alive) return;
    server.alive = false;
    server.exitStatus = status;
    children.delete(child);
    if (child.pid) tellReaper(`-${child.pid}`);
    resolveExited();
  };
  child.once('exit', (code, signal) => gone(signal ? `killed by ${signal}` : `exit code ${code}`));
  child.once('error', (error) => {
    if (child.pid === undefined) gone(`could not start: ${error.message}`);
  });
  return server;
}

export async function killServer(server: ServerProcess): Promise<void> {
  if (server.alive) server.child.kill('SIGKILL');
  await server.exited;
}

/** True once the server on `node` answers as this very process (not another server on a reused port). */
async function answersAsItself(server: ServerProcess, auth: Auth): Promise<boolean> {
  try {
    const info = parseInfo(await command(server.node, auth, 'INFO', 'server'));
    return info.process_id === String(server.child.pid);
  } catch {
    return false;
  }
}

/** Starts one server and waits until it answers; on a port taken meanwhile, tries again on another. */
export async function startServer(spec: StartSpec): Promise<ServerProcess> {
  for (let attempt = 1; ; attempt++) {
    const ports = spec.node
      ? spec.bus
        ? [spec.node.port, spec.node.port + 10_000]
        : [spec.node.port]
      : await reservePorts(spec.bus ?? false);
    const port = ports[0]!;
    const launch = spec.launch(port);
    const server = spawnServer(spec.node ?? { host: HOST, port }, ports, launch);
    const until = Date.now() + TIMEOUT_MS;
    let outcome: 'ready' | 'exited' | 'timeout' = 'timeout';
    while (Date.now() < until) {
      if (!server.alive) {
        outcome = 'exited';
        break;
      }
      if (await answersAsItself(server, spec.auth)) {
        outcome = 'ready';
        break;
      }
      await sleep(50);
    }
    if (outcome === 'ready') return server;
    await killServer(server);
    const log = logTail(launch.logFile);
    if (!spec.node) releasePorts(ports);
    if (outcome === 'exited' && /address already in use/i.test(log) && !spec.node && attempt < 5) continue;
    const how =
      outcome === 'exited'
        ? `exited at startup (${server.exitStatus})`
        : `did not answer within ${TIMEOUT_MS} ms`;
    throw new Error(`${spec.what} on ${HOST}:${port} ${how}; last log lines:\n${log}`);
  }
}

/** Starts servers in parallel; every one that started is pushed to `into` (to be stopped) even if another failed. */
export async function startAll(specs: StartSpec[], into: ServerProcess[]): Promise<ServerProcess[]> {
  const results = await Promise.allSettled(specs.map(startServer));
  const started = results.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
  into.push(...started);
  const failed = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
  if (failed) throw failed.reason;
  return started;
}

/** Kills every server, removes the dir and gives the ports back. */
export async function stopServers(servers: Iterable<ServerProcess>, dir: string): Promise<void> {
  const all = [...servers];
  await Promise.all(all.map(killServer));
  removeTempDir(dir);
  for (const server of all) releasePorts(server.ports);
}

export function passwordArgs(password: string | undefined): string[] {
  return password ? ['--requirepass', password, '--masterauth', password] : [];
}
