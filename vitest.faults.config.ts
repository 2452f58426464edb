import { defineConfig } from 'vitest/config';

// npm run test:faults: real faults injected into real processes (test/faults/). Each scenario
// records its counts; the run ends with their table (test/support/setup/faults-report.ts).
export default defineConfig({
  test: {
    include: ['test/faults/**/*.test.ts'],
    globalSetup: [
      'test/support/setup/global.ts',
      'test/support/setup/faults-report.ts',
      'test/support/setup/secret-search.ts',
    ],
    testTimeout: 300_000,
    hookTimeout: 60_000,
    // One scenario at a time: each loads the two cores on purpose.
    fileParallelism: false,
    maxWorkers: 1,
  },
});
