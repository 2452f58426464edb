// `cards-sync worker` as bin/cards-sync.js runs it, with webhook delivery's retry schedule cut from
// about a day (5 s doubling up to 6 h) to seconds, for the webhook fault scenario: a receiver down
// for 60 s would otherwise leave retries drawn minutes ahead. Test-only: the schedule is an internal
// option of the worker command that no flag or environment variable reaches, so a deployed worker
// cannot be started with it. Usage: node worker-short-retries.mjs worker [--concurrency N]
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { concurrency: { type: 'string' } }, allowPositionals: true });
const { loadConfig } = await import('../../dist/src/config/index.js');
const { cmdWorker } = await import('../../dist/src/cli/worker.js');

process.on('uncaughtException', (error) => {
  process.stderr.write(`cards-sync: fatal: ${error.message}\n`);
  process.exit(1);
});

process.exitCode = await cmdWorker(
  loadConfig(process.env),
  {
    env: process.env,
    out: (line) => process.stdout.write(`${line}\n`),
    err: (line) => process.stderr.write(`${line}\n`),
  },
  {
    ...(values.concurrency !== undefined ? { concurrency: Number(values.concurrency) } : {}),
    exitWhenIdle: false,
    shutdownTimeoutMs: 30_000,
    webhookSchedule: {
      baseMs: 200,
      maxDelayMs: 3_000,
      maxRetryAfterMs: 3_000,
      minDelayMs: 100,
      giveUpAfterMs: 24 * 3_600_000,
      disableAfterMs: 5 * 86_400_000,
    },
  },
);
