#!/usr/bin/env node
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
