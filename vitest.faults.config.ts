import { defineConfig } from 'vitest/config';

// npm run test:faults: real faults injected into real processes (test/faults/). Each scenario
// records its counts; the run ends with their table (test/setup/faults-report.ts).
export default defineConfig({
  test: {
    include: ['test/faults/**/*.test.ts'],
    globalSetup: ['test/setup/global.ts', 'test/setup/faults-report.ts', 'test/setup/secret-search.ts'],
    testTimeout: 300_000,
    hookTimeout: 60_000,
    // One scenario at a time: each loads the two cores on purpose.
    fileParallelism: false,
    maxWorkers: 1,
  },
});
