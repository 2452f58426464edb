import { rootCause } from '../db/errors.js';
import { run } from './cli.js';

// The process entry point: the only module with side effects at import time.
process.on('uncaughtException', (error) => {
  // The root cause only: a Drizzle error's own message quotes query parameters.
  process.stderr.write(`cards-sync: fatal: ${rootCause(error).message}\n`);
  process.exit(1);
});

const code = await run(process.argv.slice(2), {
  env: process.env,
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
  stdin: process.stdin,
  isTTY: process.stderr.isTTY === true,
  stdoutIsTTY: process.stdout.isTTY === true,
});
process.exitCode = code;
