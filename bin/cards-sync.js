#!/usr/bin/env node
// The long-running commands run with a young generation of Node 20's size: Node 24's larger one
// (V8 grows the semi-spaces to collect less often) took a worker from under 200 MB of RSS to
// over 300 (docs/scaling.md, "Memory"). V8 reads the size only at start, so the process replaces
// itself (same pid, so signals and supervisors see one process) with one started with it, unless
// the operator set it already (NODE_OPTIONS or a flag).
const LONG_RUNNING = new Set(['worker', 'serve']);
const SEMI_SPACE_MB = 16;
if (
  LONG_RUNNING.has(process.argv[2] ?? '') &&
  typeof process.execve === 'function' &&
  ![...process.execArgv, process.env.NODE_OPTIONS ?? ''].some((a) => a.includes('--max-semi-space-size'))
) {
  process.execve(
    process.execPath,
    [
      process.execPath,
      `--max-semi-space-size=${SEMI_SPACE_MB}`,
      ...process.execArgv,
      ...process.argv.slice(1),
    ],
    process.env,
  );
}
try {
  // Before any import of drizzle-orm: Node's resolver is slow on its files (src/cli/drizzle-resolve.ts).
  const { resolveDrizzleFilesDirectly } = await import('../dist/src/cli/drizzle-resolve.js');
  resolveDrizzleFilesDirectly();
  // Tracing is loaded only when the OTEL_* variables ask for it, and before the application, so
  // that its instrumentations see pg and pino imported (src/tracing/preload.ts).
  const { tracingWanted } = await import('../dist/src/tracing/wanted.js');
  if (tracingWanted(process.env)) await import('../dist/src/tracing/preload.js');
  await import('../dist/src/cli/main.js');
} catch (error) {
  if (
    error?.code === 'ERR_MODULE_NOT_FOUND' &&
    /Cannot find module '[^']*\/dist\/src\//.test(error.message)
  ) {
    process.stderr.write('cards-sync: not built yet; run `npm run build` first\n');
    process.exit(1);
  }
  throw error;
}
