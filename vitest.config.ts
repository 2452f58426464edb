import { defineConfig } from 'vitest/config';

// One project per kind of test (test/<kind>/); `npm test` runs them all, `vitest run --project unit`
// one. The fault suite has its own run: npm run test:faults (vitest.faults.config.ts).

/** Postgres and Redis found or started once for the run, a migrated template database per run. */
const SERVICES = 'test/support/setup/global.ts';

/** What every project shares: the timeouts, and two workers over all projects together. */
const shared = {
  testTimeout: 30_000,
  hookTimeout: 60_000,
  // Two cores here: more forks only fight over them and over Postgres.
  maxWorkers: 2,
  fileParallelism: true,
};

// `extends: false`: a project takes nothing from the root config but what it is given here. Inherited,
// the root's globalSetup would run again in every project, each one emptying the log archive.
const project = (name: string, globalSetup: string[]) => ({
  extends: false,
  test: { name, include: [`test/${name}/**/*.test.ts`], globalSetup, ...shared },
});

export default defineConfig({
  test: {
    ...shared,
    // The root's own setup runs once per run whatever projects run: every log line the run produced
    // (support/log-archive.ts) is searched for secrets at its end, unit tests' loggers included.
    globalSetup: ['test/support/setup/secret-search.ts'],
    projects: [
      // Pure code, in-process loopback servers at most: no Postgres, no Redis, no child process.
      project('unit', []),
      // Real Postgres and Redis, in-process servers and workers.
      project('integration', [SERVICES]),
      // The CLI (dist/, so build first) or other processes: redis-server, a private Postgres, node.
      project('process', [SERVICES]),
      // Chromium drives the admin pages.
      project('browser', [SERVICES]),
      // The docs, the README and the manifests (Kubernetes, Compose, Prometheus, Dockerfile)
      // checked against the code.
      project('contracts', [SERVICES]),
    ],
  },
});
