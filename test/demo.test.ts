import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTestDatabase } from './helpers.js';
import { archiveLog } from './log-archive.js';

// The newcomer's main job: `npm run demo` (here with --no-wait, so it exits after its summary).

let db: Awaited<ReturnType<typeof createTestDatabase>>;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

describe('npm run demo', () => {
  it('syncs 1,000 subscribers through the queue, prints a summary and the admin URL', async () => {
    const child = spawn(
      process.execPath,
      [new URL('../dist/src/demo.js', import.meta.url).pathname, '--no-wait'],
      {
        env: {
          PATH: process.env.PATH ?? '',
          DATABASE_URL: db.url,
          REDIS_URL: inject('redisUrl'),
          ADMIN_PORT: '0',
        },
      },
    );
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      out += d;
    });
    const [code] = await once(child, 'exit');
    archiveLog('npm run demo', out);
    expect(code, out).toBe(0);
    expect(out).toMatch(/succeeded\s+98\d/);
    expect(out).toMatch(/not_found\s+1\d/);
    expect(out).toContain('active cards per bank');
    expect(out).toMatch(/admin server: http:\/\/127\.0\.0\.1:\d+\/admin/);
  }, 90_000);

  it('says how to start Postgres and Redis when they do not answer', async () => {
    const child = spawn(
      process.execPath,
      [new URL('../dist/src/demo.js', import.meta.url).pathname, '--no-wait'],
      {
        env: {
          PATH: process.env.PATH ?? '',
          DATABASE_URL: 'postgres://postgres@127.0.0.1:1/x',
          REDIS_URL: 'redis://127.0.0.1:1',
        },
      },
    );
    let err = '';
    child.stderr.on('data', (d) => {
      err += d;
    });
    const [code] = await once(child, 'exit');
    expect(code).toBe(1);
    expect(err).toContain('Postgres does not answer');
    expect(err).toContain('Redis does not answer');
    expect(err).toContain('docker compose up -d postgres redis');
  });
});
