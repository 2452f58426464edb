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

/** Migrates one template database for the run; each test file clones it (see helpers). */
export default async function setup(project: TestProject) {
  const services = await resolveServices();
  const template = `cards_sync_tpl_${process.pid}`;
  const admin = new pg.Client({ connectionString: services.postgresUrl });
  await admin.connect();
  await admin.query(`drop database if exists ${template}`);
  await admin.end();
  const templateUrl = withDatabase(services.postgresUrl, template);
  await runMigrations(templateUrl);
  project.provide('templateUrl', templateUrl);
  project.provide('redisUrl', services.redisUrl);
  return async () => {
    const client = new pg.Client({ connectionString: services.postgresUrl });
    await client.connect();
    await client.query(`drop database if exists ${template} with (force)`);
    await client.end();
    await services.stop();
  };
}
