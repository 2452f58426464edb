import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import {
  appendFileSync,
  chownSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import type { Started } from './containers.js';

// Private, throwaway Postgres and Redis from the binaries installed on this machine (initdb and
// pg_ctl, redis-server), as the test harness starts them: what the demo stands up when the
// local servers do not answer, or when told to use private ones. Each lives in a temporary
// directory, listens on a free loopback port, and is stopped and removed by `stop()`.

/** The oldest PostgreSQL the project runs on. */
const MIN_POSTGRES_MAJOR = 15;

export interface LocalStarted extends Started {
  /** Where the binaries came from, to say so. */
  from: string;
}

/** A loopback port nothing listens on right now. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir && existsSync(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

function postgresMajor(binDir: string): number {
  const r = spawnSync(join(binDir, 'pg_ctl'), ['--version'], { encoding: 'utf8' });
  return Number(/(\d+)(?:\.\d+)?/.exec(r.stdout ?? '')?.[1] ?? 0);
}

/**
 * The directory holding initdb, pg_ctl and postgres of PostgreSQL 15 or newer: the one on PATH
 * (symlinks followed), else the newest under /usr/lib/postgresql (Debian's layout).
 */
export function findPostgresBin(): string | undefined {
  const candidates: string[] = [];
  const initdb = onPath('initdb');
  if (initdb) candidates.push(dirname(realpathSync(initdb)));
  const debian = '/usr/lib/postgresql';
  if (existsSync(debian)) {
    const versions = readdirSync(debian)
      .filter((v) => /^\d+$/.test(v))
      .sort((a, b) => Number(b) - Number(a));
    candidates.push(...versions.map((v) => join(debian, v, 'bin')));
  }
  return candidates.find(
    (dir) =>
      ['initdb', 'pg_ctl', 'postgres'].every((b) => existsSync(join(dir, b))) &&
      postgresMajor(dir) >= MIN_POSTGRES_MAJOR,
  );
}

/** initdb refuses to run as root: then the cluster belongs to the `postgres` user. */
function serverUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const uid = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
  if (uid.status !== 0 || gid.status !== 0) {
    throw new Error('initdb refuses to run as root, and there is no postgres user to run it as');
  }
  return { uid: Number(uid.stdout), gid: Number(gid.stdout) };
}

function run(binDir: string, name: string, args: string[], user: { uid: number; gid: number } | undefined) {
  const r = spawnSync(join(binDir, name), args, { encoding: 'utf8', ...(user ?? {}), cwd: tmpdir() });
  if (r.error) throw new Error(`${name}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`${name} failed: ${(r.stderr || r.stdout).trim().split('\n').pop()}`);
}

// What is still running when the process exits without stopping it (an error, a second Ctrl-C, a
// deadline): stopped at once by the exit hook, since nothing else would (pg_ctl starts Postgres in
// a session of its own, and redis-server runs detached).
const leftRunning = new Set<() => void>();
let exitHookInstalled = false;
function stopOnExit(emergency: () => void): () => void {
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.on('exit', () => {
      for (const stop of leftRunning) stop();
    });
  }
  leftRunning.add(emergency);
  return () => leftRunning.delete(emergency);
}

const quoted = (value: string) => `'${value.replace(/'/g, "''")}'`;

/**
 * A PostgreSQL cluster in a temporary directory; its URL names the maintenance database
 * `postgres`. Over TCP it asks for a random password (a local user cannot walk in as its
 * superuser); its socket is in the cluster's own directory, which only its owner can enter.
 * `settings`: more postgresql.conf lines (a test's `wal_level = logical`).
 */
export async function startLocalPostgres(
  binDir: string,
  settings: readonly string[] = [],
): Promise<LocalStarted> {
  const user = serverUser();
  const dir = mkdtempSync(join(tmpdir(), 'cards-sync-demo-pg-'));
  const data = join(dir, 'data');
  const password = randomBytes(18).toString('hex');
  const pwfile = join(dir, 'pw');
  writeFileSync(pwfile, password, { mode: 0o600 });
  if (user) for (const path of [dir, pwfile]) chownSync(path, user.uid, user.gid);
  const emergency = () => {
    spawnSync(join(binDir, 'pg_ctl'), ['-D', data, '-m', 'immediate', 'stop'], {
      ...(user ?? {}),
      cwd: tmpdir(),
    });
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const auth = ['--auth-local=trust', '--auth-host=scram-sha-256', `--pwfile=${pwfile}`];
    run(binDir, 'initdb', ['-D', data, '-U', 'postgres', '-E', 'UTF8', '--no-sync', ...auth], user);
    rmSync(pwfile);
    const port = await freePort();
    // Settings in the file, not on pg_ctl's command line, which goes through a shell.
    const conf = [
      `port = ${port}`,
      "listen_addresses = '127.0.0.1'",
      `unix_socket_directories = ${quoted(dir)}`,
      'fsync = off',
      ...settings,
    ];
    appendFileSync(join(data, 'postgresql.conf'), `\n${conf.join('\n')}\n`);
    const forget = stopOnExit(emergency);
    try {
      run(binDir, 'pg_ctl', ['-D', data, '-l', join(dir, 'log'), '-w', 'start'], user);
    } catch (error) {
      forget();
      throw error;
    }
    return {
      url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
      from: binDir,
      stop: async () => {
        forget();
        try {
          run(binDir, 'pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop'], user);
        } catch {
          emergency();
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      },
    };
  } catch (error) {
    emergency();
    throw error;
  }
}

/** `redis-server` on PATH (or Debian's /usr/bin). */
export function findRedisServer(): string | undefined {
  return (
    onPath('redis-server') ?? (existsSync('/usr/bin/redis-server') ? '/usr/bin/redis-server' : undefined)
  );
}

/** Whether a Redis answers PING at `host:port` within `timeoutMs` (no client, no retries). */
export async function redisAnswers(
  host: string,
  port: number,
  timeoutMs = 500,
  password?: string,
): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    let answer = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('error', () => done(false));
    socket.connect(port, host, () =>
      socket.write(`${password === undefined ? '' : `AUTH ${password}\r\n`}PING\r\n`),
    );
    socket.on('data', (d) => {
      answer += d.toString();
      if (answer.includes('+PONG')) done(true);
      else if (answer.includes('-')) done(false);
    });
  });
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  await exited;
}

/** A Redis that keeps nothing on disk, with the eviction policy BullMQ needs. */
export async function startLocalRedis(binary: string): Promise<LocalStarted> {
  const dir = mkdtempSync(join(tmpdir(), 'cards-sync-demo-redis-'));
  const port = await freePort();
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--save',
    '',
    '--appendonly',
    'no',
  ];
  const password = randomBytes(18).toString('hex');
  // Detached: a Ctrl-C at the terminal is the demo's to handle, and it stops this server last.
  const child = spawn(binary, [...args, '--maxmemory-policy', 'noeviction', '--requirepass', password], {
    stdio: 'ignore',
    detached: true,
  });
  const forget = stopOnExit(() => {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });
  const stop = async () => {
    forget();
    try {
      await stopChild(child);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  const failed = new Promise<never>((_, reject) => {
    child.once('error', (e) => reject(new Error(`redis-server: ${e.message}`)));
    child.once('exit', (code) => reject(new Error(`redis-server exited (${code}) before it answered`)));
  });
  failed.catch(() => {});
  try {
    const deadline = Date.now() + 10_000;
    while (!(await Promise.race([redisAnswers('127.0.0.1', port, 500, password), failed]))) {
      if (Date.now() > deadline) throw new Error('redis-server did not answer within 10 s');
      await new Promise((r) => setTimeout(r, 50));
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return { url: `redis://:${password}@127.0.0.1:${port}`, from: binary, stop };
}
