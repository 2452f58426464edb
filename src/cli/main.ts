import { rootCause } from '../../db/errors.js';
import { tracing } from '../tracing/index.js';
import { run } from './program.js';

// The process entry point: the only module with side effects at import time.
process.on('uncaughtException', (error) => {
  // The root cause only: a Drizzle error's own message quotes query parameters.
  process.stderr.write(`cards-sync: fatal: ${rootCause(error).message}\n`);
  process.exit(1);
});

// A reader that stops early (`cards-sync status | head -3`) closes the pipe: the user got what
// they asked for. The next write to standard output fails with EPIPE; exit 0 there and then,
// quietly, as ripgrep does. Not 141 (a death by SIGPIPE, as C tools die): Node ignores SIGPIPE,
// and under `set -o pipefail` a script's `status | head` would fail for no fault of anyone's.
// Standard error's reader gone is no reason to change the exit code: its lines are dropped.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});
process.stderr.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error;
});

const code = await run(process.argv.slice(2), {
  env: process.env,
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
  stdin: process.stdin,
  isTTY: process.stderr.isTTY === true,
  stdoutIsTTY: process.stdout.isTTY === true,
});
// Spans still buffered are exported before the process ends (a no-op while tracing is off).
await tracing().flush();
process.exitCode = code;
