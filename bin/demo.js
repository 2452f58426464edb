#!/usr/bin/env node
// `npm run demo`: the whole pipeline on this machine (src/demo/main.ts), started as the CLI starts
// (bin/cards-sync.js): drizzle-orm's files resolved directly first, for Node's resolver is slow on
// them (src/cli/drizzle-resolve.ts).
try {
  const { resolveDrizzleFilesDirectly } = await import('../dist/src/cli/drizzle-resolve.js');
  resolveDrizzleFilesDirectly();
  await import('../dist/src/demo/main.js');
} catch (error) {
  if (
    error?.code === 'ERR_MODULE_NOT_FOUND' &&
    /Cannot find module '[^']*\/dist\/src\//.test(error.message)
  ) {
    process.stderr.write('cards-sync demo: not built yet; run `npm run build` first\n');
    process.exit(1);
  }
  throw error;
}
