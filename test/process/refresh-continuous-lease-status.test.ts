import { hostname } from 'node:os';
import pg from 'pg';
import { expect, inject, it } from 'vitest';
import { withDatabase } from '../../db/databases.js';
import { LEASE_APPLICATION_NAME, LEASE_LOCK_KEY } from '../../db/refresh/lease.js';
import { createRedis } from '../../jobs/redis.js';
import { readLeaseHolder } from '../../jobs/refresh/index.js';
import { startScenario } from '../faults/scenario.js';
import { adminFor } from '../support/admin-helpers.js';
import { useCleanups, useTestDatabase } from '../support/helpers.js';
import { leaseHolderPid } from '../support/lease-holder.js';
import { runCli, type testQueue, waitFor } from '../support/queue-helpers.js';

// Who holds the continuous refresh's lease, as an operator reads it at 3 a.m.: `status`,
// `status --json` (`continuous.leaseHolder`) and the overview name the real worker holding it
// (its fleet id, pid, since when), and say plainly that nobody does once it has stopped.

const database = useTestDatabase();
const cleanups = useCleanups();

it('status, status --json and the overview name the worker holding the lease, and warn when none does', async () => {
  const s = await startScenario({
    db: database,
    cleanups,
    subscribers: 20,
    firstId: 9_600_000,
    env: { REFRESH_MODE: 'continuous', REFRESH_BUDGET_PER_SEC: '5', REFRESH_MAX_AGE: '2m' },
  });
  const pool = database.handle.pool;
  const redis = createRedis(inject('redisUrl'));
  cleanups.push(async () => redis.disconnect());
  const q = { redis, prefix: s.env.QUEUE_PREFIX!, queue: s.queue } as ReturnType<typeof testQueue>;
  const overview = adminFor(database, q, cleanups);
  const before = Date.now();
  const worker = s.startWorker();
  const pid = worker.process.pid!;
  await waitFor('the worker holding the lease', async () => (await leaseHolderPid(pool)) === pid, 60_000);
  const { rows } = await pool.query<{ id: string }>('select id from fleet_processes where pid = $1', [pid]);
  const fleetId = rows[0]!.id;

  const text = await runCli(['status'], s.env);
  expect(text.code, text.stderr).toBe(0);
  expect(text.stdout).toMatch(
    new RegExp(
      `^ {2}lease: held by ${fleetId} since \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\dZ \\(Postgres session \\d+\\)$`,
      'm',
    ),
  );
  const json = JSON.parse((await runCli(['status', '--json'], s.env)).stdout);
  expect(json.continuous.leaseHolder).toMatchObject({ fleetId, host: hostname(), pid });
  const since = Date.parse(json.continuous.leaseHolder.since);
  expect(since).toBeGreaterThanOrEqual(before - 1000);
  expect(since).toBeLessThanOrEqual(Date.now());
  // The session named is the one holding the lock: terminating it is how an operator ends the lease.
  const { rows: locks } = await pool.query<{ pid: number }>(
    `select pid from pg_locks where locktype = 'advisory' and granted and pid = $1`,
    [json.continuous.leaseHolder.session],
  );
  expect(locks).toHaveLength(1);
  // The existing keys stay.
  for (const key of ['window', 'dueNow', 'pastMaxAge', 'oldestCopy'])
    expect(json.continuous).toHaveProperty(key);
  expect(await overview('/admin')).toContain(`<p id="continuous-lease">Lease: held by ${fleetId} since `);

  worker.process.kill('SIGTERM');
  expect((await worker.done).code).toBe(0);
  const after = await runCli(['status'], s.env);
  expect(after.stdout).toMatch(/^ {2}lease: NO WORKER HOLDS IT: no window is being served\./m);
  expect(JSON.parse((await runCli(['status', '--json'], s.env)).stdout).continuous.leaseHolder).toBeNull();
  expect(await overview('/admin')).toContain(
    '<p id="continuous-lease" class="alert">Lease: NO WORKER HOLDS IT: no window is being served.',
  );
}, 150_000);

it("a lease held in another database on the same server is not this deployment's holder", async () => {
  // Advisory locks are per database: another deployment (or a demo) on the server has its own.
  const elsewhere = new pg.Client({
    connectionString: withDatabase(database.url, 'postgres'),
    application_name: `${LEASE_APPLICATION_NAME} (pid 4242)`,
  });
  await elsewhere.connect();
  cleanups.push(() => elsewhere.end());
  await elsewhere.query('select pg_advisory_lock($1)', [LEASE_LOCK_KEY]);
  expect(await leaseHolderPid(database.handle.pool)).toBeUndefined();
  const redis = createRedis(inject('redisUrl'));
  cleanups.push(async () => redis.disconnect());
  expect(await readLeaseHolder(database.handle.pool, redis, 'cards-sync-elsewhere')).toBeNull();
});
