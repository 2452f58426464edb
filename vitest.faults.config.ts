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
    // Two scenarios at a time: each injects its own fault into its own processes (its own mock API,
    // proxies, Redis nodes, queue prefix and database), so none sees another's, and a scenario
    // counts what was lost or duplicated, not how fast it went. One at a time, the suite was a third
    // of the clean-clone CI run (docs/benchmarks.md, "CI").
    fileParallelism: true,
    maxWorkers: 2,
  },
});
