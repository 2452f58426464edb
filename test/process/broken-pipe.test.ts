import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, inject, it } from 'vitest';
import { useTestDatabase } from '../support/helpers.js';
import { CLI, testQueue } from '../support/queue-helpers.js';

// `cards-sync status | head -3`: the reader leaves before the command has written everything.
// That is the user's choice, not a failure: no "fatal: write EPIPE", exit 0 (see src/cli/main.ts).

const database = useTestDatabase();

/** Runs the CLI with its standard output a pipe whose reader has already gone. */
async function intoClosedPipe(args: string[], env: Record<string, string>) {
  const child = spawn(process.execPath, [CLI, ...args], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // Closed before the child can write its first line: every write of its fails with EPIPE.
  child.stdout.destroy();
  let stderr = '';
  child.stderr.on('data', (d) => {
    stderr += d;
  });
  const [code] = await once(child, 'exit');
  return { code: code as number | null, stderr };
}

/** The same through a shell, as a user types it: the exit status of the CLI in `cli | true`. */
async function inShellPipeline(args: string[], env: Record<string, string>) {
  const child = spawn(
    'bash',
    ['-c', `"${process.execPath}" "${CLI}" ${args.join(' ')} | true; echo "cli exit \${PIPESTATUS[0]}"`],
    { env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env } },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => {
    stdout += d;
  });
  child.stderr.on('data', (d) => {
    stderr += d;
  });
  await once(child, 'exit');
  return { stdout, stderr };
}

describe('a reader that closes the pipe early', () => {
  it('every command that writes to standard output exits 0 and quietly', async () => {
    const q = testQueue();
    try {
      const env = { REDIS_URL: inject('redisUrl'), QUEUE_PREFIX: q.prefix, DATABASE_URL: database.url };
      for (const args of [['status'], ['status', '--json'], ['doctor'], ['--version'], ['--help']]) {
        const run = await intoClosedPipe(args, env);
        expect({ args, stderr: run.stderr }).toEqual({ args, stderr: '' });
        expect(run.code, args.join(' ')).toBe(0);
      }
    } finally {
      await q.cleanup();
    }
  });

  it('`cards-sync status | true` in a shell: exit 0, no "fatal: write EPIPE"', async () => {
    const q = testQueue();
    try {
      const env = { REDIS_URL: inject('redisUrl'), QUEUE_PREFIX: q.prefix, DATABASE_URL: database.url };
      const run = await inShellPipeline(['status'], env);
      expect(run.stderr).not.toContain('EPIPE');
      expect(run.stderr).toBe('');
      expect(run.stdout).toBe('cli exit 0\n');
    } finally {
      await q.cleanup();
    }
  });
});
