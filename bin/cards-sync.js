#!/usr/bin/env node
try {
  await import('../dist/src/main.js');
} catch (error) {
  if (error?.code === 'ERR_MODULE_NOT_FOUND' && String(error.message).includes('dist/src/main.js')) {
    process.stderr.write('cards-sync: not built yet; run `npm run build` first\n');
    process.exit(1);
  }
  throw error;
}
