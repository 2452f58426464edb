#!/usr/bin/env node
// The worker runs with V8's heap held to what it needs: on Node 24 a worker's RSS went from under
// 200 MB to 290-390 MB at the default concurrency (npm run bench:memory; docs/scaling.md, "Memory"),
// V8 growing the young generation (Node 24 lets it grow larger) and the old one (it collects late
// under a limit sized to the machine) far beyond the live set. V8 reads both sizes only at start,
// so the process replaces itself (same pid: signals and supervisors see one process) with one
// started with them. A size the operator set (NODE_OPTIONS or a flag) is kept, and not added again.
// `serve` keeps the young generation only: its pages are not the worker's steady load.
const HEAP_FLAGS = {
  worker: ['--max-semi-space-size=16', '--max-old-space-size=128'],
  serve: ['--max-semi-space-size=16'],
};
const wanted = Object.hasOwn(HEAP_FLAGS, process.argv[2] ?? '') ? HEAP_FLAGS[process.argv[2]] : undefined;
if (wanted !== undefined && typeof process.execve === 'function') {
  const given = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)];
  const missing = wanted.filter((flag) => !given.some((g) => g.startsWith(flag.split('=')[0])));
  if (missing.length > 0)
    process.execve(
      process.execPath,
      [process.execPath, ...missing, ...process.execArgv, ...process.argv.slice(1)],
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
