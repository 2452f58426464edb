import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { withDatabase } from '../../../db/databases.js';
import { runMigrations } from '../../../db/migrate.js';
import { resolveServices } from './services.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of the migrated template database; test files clone it. */
    templateUrl: string;
    redisUrl: string;
  }
}

interface Started {
  templateUrl: string;
  redisUrl: string;
  stop(): Promise<void>;
}

/** Finds or starts the services and migrates one template database for the run. */
async function start(): Promise<Started> {
  const services = await resolveServices();
  const template = `cards_sync_tpl_${process.pid}`;
  const admin = new pg.Client({ connectionString: services.postgresUrl });
  await admin.connect();
  await admin.query(`drop database if exists ${template}`);
  await admin.end();
  const templateUrl = withDatabase(services.postgresUrl, template);
  await runMigrations(templateUrl);
  return {
    templateUrl,
    redisUrl: services.redisUrl,
    stop: async () => {
      const client = new pg.Client({ connectionString: services.postgresUrl });
      await client.connect();
      await client.query(`drop database if exists ${template} with (force)`);
      await client.end();
      await services.stop();
    },
  };
}

// Each vitest project that lists this file loads it apart (its own module), all in the one main
// process: they share one start through globalThis, and the last project's teardown stops it.
const SHARED = Symbol.for('cards-sync.test-services');
type Shared = { started: Promise<Started>; users: number };
const registry = globalThis as { [SHARED]?: Shared };

/** Migrates one template database for the run; each test file clones it (see support/helpers.ts). */
export default async function setup(project: TestProject) {
  registry[SHARED] ??= { started: start(), users: 0 };
  const shared = registry[SHARED];
  shared.users++;
  const started = await shared.started;
  project.provide('templateUrl', started.templateUrl);
  project.provide('redisUrl', started.redisUrl);
  return async () => {
    shared.users--;
    if (shared.users > 0) return;
    delete registry[SHARED];
    await started.stop();
  };
}
