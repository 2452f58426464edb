import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { findPostgresBin, findRedisServer, redisAnswers } from '../../src/demo/local-servers.js';
import { resolveServices } from '../support/setup/services.js';

// How `npm test` finds Postgres and Redis on a machine where they are installed but not running:
// private ones from the binaries, stopped and removed with the run.

describe.skipIf(!findPostgresBin() || !findRedisServer())('the test services', () => {
  it('installed but not answering: private Postgres and Redis from the binaries, gone after stop', async () => {
    const dead = { postgres: 'postgres://postgres@127.0.0.1:1/postgres', redis: 'redis://127.0.0.1:1' };
    const services = await resolveServices({}, dead);
    const pgUrl = new URL(services.postgresUrl);
    const redisUrl = new URL(services.redisUrl);
    try {
      expect(pgUrl.port).not.toBe('1');
      expect(redisUrl.port).not.toBe('1');
      const client = new pg.Client({ connectionString: services.postgresUrl });
      await client.connect();
      const { rows } = await client.query<{ v: number }>(
        `select current_setting('server_version_num')::int as v`,
      );
      await client.end();
      expect(rows[0]?.v).toBeGreaterThanOrEqual(150000);
      expect(await redisAnswers('127.0.0.1', Number(redisUrl.port), 500, redisUrl.password)).toBe(true);
      expect(await redisAnswers('127.0.0.1', Number(redisUrl.port))).toBe(false);
    } finally {
      await services.stop();
    }
    expect(await redisAnswers('127.0.0.1', Number(redisUrl.port), 500, redisUrl.password)).toBe(false);
    const after = new pg.Client({ connectionString: services.postgresUrl, connectionTimeoutMillis: 2000 });
    await expect(after.connect()).rejects.toThrow();
  }, 60_000);

  it('a TEST_DATABASE_URL that does not answer is reported, never swapped', async () => {
    await expect(resolveServices({ TEST_DATABASE_URL: 'postgres://postgres@127.0.0.1:1/x' })).rejects.toThrow(
      /TEST_DATABASE_URL is set but Postgres does not answer there/,
    );
  });
});
