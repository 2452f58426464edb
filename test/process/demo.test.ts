import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { chmodSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createDb } from '../../db/client.js';
import { createSyncQueue } from '../../jobs/sync/index.js';
import { verifyDelivery } from '../../src/demo/receiver.js';
import { findServices, ServicesMissing } from '../../src/demo/services.js';
import { freshnessRows } from '../../src/demo/summary.js';
import { newWebhookSecret, signedHeaders } from '../../src/webhooks/signing.js';
import { createTestDatabase } from '../support/helpers.js';
import { archiveLog } from '../support/log-archive.js';
import { waitFor } from '../support/queue-helpers.js';

// The newcomer's main job: `npm run demo` (here with --no-wait, so it exits after its summary).

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let redis: Redis;
beforeAll(async () => {
  db = await createTestDatabase();
  redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: null });
});
afterAll(async () => {
  redis?.disconnect();
  await db?.drop();
});

async function demo(args: string[], env: Record<string, string>): Promise<{ code: number; out: string }> {
  const child = spawn(process.execPath, [new URL('../../bin/demo.js', import.meta.url).pathname, ...args], {
    env: { PATH: process.env.PATH ?? '', ADMIN_PORT: '0', ...env },
  });
  let out = '';
  child.stdout.on('data', (d) => {
    out += d;
  });
  child.stderr.on('data', (d) => {
    out += d;
  });
  const [code] = await once(child, 'exit');
  archiveLog(`npm run demo ${args.join(' ')}`, out);
  return { code: code as number, out };
}

async function query<T>(url: string, text: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(text, values)).rows as T[];
  } finally {
    await client.end();
  }
}

/** Whether anything listens on a loopback port. */
async function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

const succeeded = (out: string) => Number(/succeeded\s+(\d+)/.exec(out)?.[1]);

/**
 * The summary's webhooks line: how many events its receiver verified, and by type. Each type's count
 * adds up to the total, and no delivery failed verification.
 */
function webhooksReceived(out: string): { events: number; byType: Record<string, number> } {
  const line =
    /webhooks: (\d+) events received at http:\/\/127\.0\.0\.1:\d+\/hook, all signatures verified(?:: (.*))?\n/.exec(
      out,
    );
  expect(line, out).not.toBeNull();
  const byType: Record<string, number> = Object.fromEntries(
    (line?.[2] ?? '')
      .split(', ')
      .filter(Boolean)
      .map((part) => {
        const [type, n] = part.split(' ');
        return [type, Number(n)];
      }),
  );
  const events = Number(line?.[1]);
  expect(Object.values(byType).reduce((a, b) => a + b, 0)).toBe(events);
  return { events, byType };
}

describe('npm run demo', () => {
  it('without --no-wait: the admin address it prints answers, until Ctrl-C stops it and it cleans up', async () => {
    const child = spawn(process.execPath, [new URL('../../bin/demo.js', import.meta.url).pathname], {
      env: {
        PATH: process.env.PATH ?? '',
        ADMIN_PORT: '0',
        DATABASE_URL: db.url,
        REDIS_URL: inject('redisUrl'),
      },
    });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      out += d;
    });
    try {
      await waitFor('the demo to serve', async () => out.includes('Press Ctrl-C to stop.'), 60_000);
      const url = /admin server: (http:\/\/127\.0\.0\.1:\d+)\/admin/.exec(out)?.[1];
      expect(url, out).toBeDefined();
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
      child.kill('SIGINT');
      const [code] = await once(child, 'exit');
      expect(code, out).toBe(0);
      expect(out).toContain("cleaned up: removed the demo's queue keys, dropped its database");
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      archiveLog('npm run demo (served)', out);
    }
  }, 90_000);

  it('two demos at once on one Postgres and Redis: each in its own database and prefix, each cleans up only itself', async () => {
    // DATABASE_URL names the test database: the demo must use only its server, never that database.
    const env = { DATABASE_URL: db.url, REDIS_URL: inject('redisUrl') };
    const runs = await Promise.all([demo(['--no-wait'], env), demo(['--no-wait'], env)]);
    const prefixes: string[] = [];
    const databases: string[] = [];
    for (const { code, out } of runs) {
      expect(code, out).toBe(0);
      // This run alone: 1,000 subscribers, every 97th unknown to the mock API.
      expect(succeeded(out), out).toBe(989);
      expect(out).toMatch(/not_found\s+11\b/);
      // Every subscriber in one freshness bucket: the 11 unknown upstream too, adding up to 1,000.
      expect(out).toMatch(/synced within 1 h +989 *\n/);
      expect(out).toMatch(/not found upstream +11 *\n/);
      expect(out).toMatch(/total +1000 *\n/);
      expect(out).toContain('active cards per bank');
      // Its receiver got this run's events, each signature verified: a first sync adds every card.
      const hooks = webhooksReceived(out);
      expect(hooks.events).toBeGreaterThan(0);
      expect(hooks.byType['card.added']).toBeGreaterThan(0);
      // Not a terminal: no bar, so a last progress line with the total before "idle".
      expect(out).toMatch(/1000\/1000 jobs done\n\s+idle after/);
      // It exits at once: no address or password of a server already gone.
      expect(out).toContain('admin server: not started with --no-wait');
      expect(out).not.toMatch(/password:/);
      expect(out).toContain("cleaned up: removed the demo's queue keys, dropped its database");
      prefixes.push(/queue prefix (\S+)\)/.exec(out)![1]!);
      databases.push(/created database (\S+) for this run/.exec(out)![1]!);
    }
    expect(new Set(prefixes).size).toBe(2);
    expect(new Set(databases).size).toBe(2);
    for (const prefix of prefixes) expect(await redis.keys(`${prefix}*`)).toEqual([]);
    const left = await query(db.url, 'select datname from pg_database where datname = any($1)', [databases]);
    expect(left).toEqual([]);
    const [{ n } = { n: -1 }] = await query<{ n: number }>(
      db.url,
      'select count(*)::int as n from subscribers',
    );
    expect(n).toBe(0);
  }, 90_000);

  it('told a database and a prefix: keeps its rows there, summarises each run alone, removes only its own jobs', async () => {
    const prefix = `demo-told-${randomBytes(4).toString('hex')}`;
    const queue = createSyncQueue(redis, { prefix, attempts: 1 });
    const foreign = await queue.add(
      'sync',
      { target: { subscriberId: 7 }, trigger: 'manual' },
      { jobId: 'someone-elses' },
    );
    await redis.set(`${prefix}:someone-else`, 'theirs');
    const env = { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/x', REDIS_URL: inject('redisUrl') };
    const args = ['--no-wait', '--database-url', db.url, '--prefix', prefix];
    let received = 0;
    for (let run = 0; run < 2; run++) {
      const { code, out } = await demo(args, env);
      expect(code, out).toBe(0);
      expect(out).toContain(`database ${db.name}, as told`);
      expect(succeeded(out), out).toBe(989);
      expect(out).toContain("cleaned up: removed the demo's jobs");
      received += webhooksReceived(out).events;
    }
    // Every change event of the two runs arrived, once each (the foreign job's too: the demo's
    // worker ran it, and its endpoint takes every event); the endpoint went with its run.
    const [events] = await query<{ n: number }>(db.url, 'select count(*)::int as n from change_events');
    expect(events?.n).toBeGreaterThan(0);
    expect(received).toBe(events?.n);
    expect(await query(db.url, 'select id from webhook_endpoints')).toEqual([]);
    expect(await query(db.url, 'select id from webhook_deliveries')).toEqual([]);
    const [{ n } = { n: -1 }] = await query<{ n: number }>(
      db.url,
      `select count(*)::int as n from sync_runs where subscriber_id between 100001 and 101000`,
    );
    expect(n).toBe(2000);
    expect(await redis.get(`${prefix}:someone-else`)).toBe('theirs');
    expect(await queue.getJob(foreign.id!)).toBeDefined();
    expect(await queue.getJobCounts('completed', 'failed', 'wait')).toEqual({
      completed: 1,
      failed: 0,
      wait: 0,
    });
    await queue.obliterate({ force: true });
    await redis.del(`${prefix}:someone-else`);
    await queue.close();
  }, 90_000);

  it('says how to start Postgres and Redis when they do not answer (and no Docker engine does)', async () => {
    const { code, out } = await demo(['--no-wait'], {
      DATABASE_URL: 'postgres://postgres@127.0.0.1:1/x',
      REDIS_URL: 'redis://127.0.0.1:1',
      DOCKER_HOST: 'tcp://127.0.0.1:1',
    });
    expect(code).toBe(1);
    expect(out).toContain('Postgres does not answer');
    expect(out).toContain('Redis does not answer');
    expect(out).toContain('docker compose up -d postgres redis');
  });

  it('--private-servers: a private Postgres and Redis from the installed binaries, removed on exit', async () => {
    // A temporary directory of the run's own, so that what is left in it is the demo's alone.
    const tmp = mkdtempSync(join(tmpdir(), 'cards-sync-demo-test-'));
    chmodSync(tmp, 0o755);
    const { code, out } = await demo(['--no-wait', '--private-servers'], {
      DOCKER_HOST: 'tcp://127.0.0.1:1',
      TMPDIR: tmp,
    });
    expect(code, out).toBe(0);
    const pgLine =
      /Postgres as asked: started a private one from (\S+) \(127\.0\.0\.1:(\d+)\), removed on exit/.exec(out);
    const redisLine = /Redis as asked: started a private one from (\S+) \(127\.0\.0\.1:(\d+)\)/.exec(out);
    expect(pgLine, out).not.toBeNull();
    expect(redisLine, out).not.toBeNull();
    expect(Number(pgLine?.[2])).not.toBe(5432);
    expect(Number(redisLine?.[2])).not.toBe(6379);
    expect(succeeded(out), out).toBe(989);
    expect(out).toContain('stopped and removed its private servers');
    // Gone: neither port is open, and the run's temporary directory is empty.
    expect(await portOpen(Number(pgLine?.[2]))).toBe(false);
    expect(await portOpen(Number(redisLine?.[2]))).toBe(false);
    expect(readdirSync(tmp)).toEqual([]);
    rmSync(tmp, { recursive: true });
  }, 90_000);

  it('a local default that does not answer gets a private stand-in; a named one never does', async () => {
    const dead = 'postgres://postgres@127.0.0.1:1/x';
    const deadRedis = { topology: 'single', url: 'redis://127.0.0.1:1' } as const;
    const services = await findServices(dead, deadRedis, { postgres: false, redis: false });
    try {
      expect(services.started.join('\n')).toMatch(/Postgres does not answer locally: started a private one/);
      expect(services.started.join('\n')).toMatch(/Redis does not answer locally: started a private one/);
      expect(services.privatePostgres).toBe(true);
      // Over TCP it asks for its password: a local user cannot walk in as its superuser.
      const withoutPassword = new URL(services.postgresUrl);
      withoutPassword.password = '';
      await expect(query(withoutPassword.toString(), 'select 1')).rejects.toThrow(/password/);
      const [row] = await query<{ v: number }>(
        services.postgresUrl,
        `select current_setting('server_version_num')::int as v`,
      );
      expect(row?.v).toBeGreaterThanOrEqual(150000);
      const r = new Redis(services.redisUrl ?? '', { maxRetriesPerRequest: 0 });
      expect(await r.config('GET', 'maxmemory-policy')).toEqual(['maxmemory-policy', 'noeviction']);
      r.disconnect();
    } finally {
      await services.stop();
    }
    expect(await portOpen(Number(new URL(services.postgresUrl).port))).toBe(false);
    await expect(findServices(dead, deadRedis, { postgres: true, redis: true })).rejects.toThrow(
      ServicesMissing,
    );
  }, 60_000);

  it('refuses --private-servers with --keep or --database-url', async () => {
    for (const extra of [['--keep'], ['--database-url', 'postgres://postgres@127.0.0.1/x']]) {
      const { code, out } = await demo(['--no-wait', '--private-servers', ...extra], {});
      expect(code).toBe(2);
      expect(out).toContain('--private-servers removes its own Postgres on exit');
    }
  });

  it('refuses an unknown flag with its usage', async () => {
    const { code, out } = await demo(['--nowait'], {});
    expect(code).toBe(2);
    expect(out).toContain("Unknown option '--nowait'");
    expect(out).toContain('--no-wait');
  });
});

describe("the demo's summary", () => {
  it('puts every subscriber of the run in one freshness bucket, the unknown upstream included', async () => {
    const handle = createDb(db.url, { max: 1 });
    try {
      const pool = handle.pool;
      const since = new Date(Date.now() - 60_000);
      await pool.query(`insert into subscribers (subscriber_id, last_success_at)
        select g, now() from generate_series(500001, 500006) g`);
      await pool.query(`insert into subscribers (subscriber_id, last_success_at, last_status)
        values (500007, now() - interval '2 hours', 'succeeded'), (500008, null, 'failed')`);
      // 500009 is unknown upstream (a 404 stores a run, no subscriber); 500010 failed; and an
      // older run's 404 of 500007, before this run, does not count.
      await pool.query(`insert into sync_runs (subscriber_id, trigger, started_at, finished_at, status)
        values (500009, 'manual', now(), now(), 'not_found'), (500010, 'manual', now(), now(), 'failed'),
               (500007, 'manual', now() - interval '1 day', now() - interval '1 day', 'not_found')`);
      const rows = await freshnessRows(handle.db, { firstId: 500001, lastId: 500010, since });
      expect(rows).toEqual([
        { bucket: 'synced within 1 h', subscribers: 6 },
        { bucket: 'synced over 1 h ago', subscribers: 1 },
        { bucket: 'never synced', subscribers: 2 },
        { bucket: 'not found upstream', subscribers: 1 },
        { bucket: 'total', subscribers: 10 },
      ]);
    } finally {
      await handle.pool.query('delete from sync_runs where subscriber_id between 500001 and 500010');
      await handle.pool.query('delete from subscribers where subscriber_id between 500001 and 500010');
      await handle.close();
    }
  });
});

describe("the demo's receiver", () => {
  it('verifies a signature under either secret of a rotation, and refuses a changed body, another secret or a stale timestamp', () => {
    const [current, previous, other] = [newWebhookSecret(), newWebhookSecret(), newWebhookSecret()];
    const now = Math.floor(Date.now() / 1000);
    const body = '{"id":"evt_1","type":"card.added"}';
    const headers = { ...signedHeaders([current, previous], 'evt_1', now, body) };
    expect(verifyDelivery(current, headers, body, now)).toBe(true);
    expect(verifyDelivery(previous, headers, body, now)).toBe(true);
    expect(verifyDelivery(other, headers, body, now)).toBe(false);
    expect(verifyDelivery(current, headers, body.replace('added', 'removed'), now)).toBe(false);
    expect(verifyDelivery(current, headers, body, now + 301)).toBe(false);
    expect(verifyDelivery(current, { ...headers, 'webhook-id': 'evt_2' }, body, now)).toBe(false);
  });
});
