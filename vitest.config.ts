import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The fault suite has its own run: npm run test:faults (vitest.faults.config.ts).
    exclude: ['test/faults/**', '**/node_modules/**'],
    globalSetup: ['test/support/setup/global.ts', 'test/support/setup/secret-search.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Two cores here: more forks only fight over them and over Postgres.
    maxWorkers: 2,
    fileParallelism: true,
  },
});
