import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Queue } from 'bullmq';
import { inject } from 'vitest';
import { createRedis, type RedisClient } from '../../jobs/redis.js';
import { createSyncQueue, type SyncJobData, type SyncJobResult } from '../../jobs/sync/index.js';
import type { RedisConfig } from '../../src/config/index.js';
import { archiveLog } from './log-archive.js';

export const CLI = new URL('../../bin/cards-sync.js', import.meta.url).pathname;

/** A queue under its own prefix, obliterated by `cleanup()`. */
export function testQueue(
  options: { attempts?: number; backoffDelayMs?: number; redisUrl?: string | RedisConfig } = {},
): {
  prefix: string;
  redis: RedisClient;
  queue: Queue<SyncJobData, SyncJobResult>;
  cleanup(): Promise<void>;
} {
  const target = options.redisUrl ?? inject('redisUrl');
  // On a Cluster every key of the queue must share one slot: a {hash tag} prefix.
  const tag = `t${randomBytes(5).toString('hex')}`;
  const prefix = typeof target !== 'string' && target.topology === 'cluster' ? `{${tag}}` : tag;
  const redis = createRedis(target, { blocking: true });
  const queue = createSyncQueue(redis, {
    prefix,
    attempts: options.attempts ?? 3,
    backoffDelayMs: options.backoffDelayMs ?? 50,
  });
  return {
    prefix,
    redis,
    queue,
    async cleanup() {
      await queue.obliterate({ force: true }).catch(() => {});
      const keys = await redis.keys(`${prefix}:*`);
      if (keys.length) await redis.del(...keys);
      await queue.close();
      redis.disconnect();
    },
  };
}

/** Waits until `check` holds, polling; fails with `what` after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | false | undefined>,
  timeoutMs = 15_000,
): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

export interface CliRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs the built CLI as a user would; resolves when it exits. */
export async function runCli(
  args: string[],
  env: Record<string, string>,
  input?: string | Buffer,
): Promise<CliRun> {
  const child = startCli(args, env);
  if (input !== undefined) child.process.stdin?.end(input);
  else child.process.stdin?.end();
  return child.done;
}

export interface CliProcess {
  process: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  done: Promise<CliRun>;
}

/** Starts the built CLI (or another build's, `bin`) in the background. */
export function startCli(args: string[], env: Record<string, string>, bin = CLI): CliProcess {
  const child = spawn(process.execPath, [bin, ...args], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => {
    stdout += d;
  });
  child.stderr!.on('data', (d) => {
    stderr += d;
  });
  const done = once(child, 'exit').then(([code, signal]) => {
    archiveLog(`cards-sync ${args[0] ?? ''} (pid ${child.pid})`, stdout + stderr);
    return { code, signal, stdout, stderr } as CliRun;
  });
  return { process: child, stdout: () => stdout, stderr: () => stderr, done };
}
