import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'drizzle-orm';
import { afterAll, expect, it } from 'vitest';
import { createDb } from '../../db/client.js';
import { isConnectionError, rootCause } from '../../db/errors.js';
import { proxyDatabase } from '../faults/tcp-proxy.js';
import { useTestDatabase } from '../support/helpers.js';
import { waitFor } from '../support/queue-helpers.js';

// Every transaction outside the sync write path (refresh runs, the admin's writes, migrations'
// bookkeeping) holds a checked-out pool client, which pg leaves without an 'error' listener.

const database = useTestDatabase();
const handles: ReturnType<typeof createDb>[] = [];
afterAll(async () => {
  for (const h of handles) await h.close().catch(() => {});
});

it('a connection killed inside a Drizzle transaction fails that transaction and does not crash the process', async () => {
  const handle = createDb(database.url, { max: 2 });
  handles.push(handle);
  const attempt = handle.db.transaction(async (tx) => {
    const r = await tx.execute<{ pid: number }>(sql`select pg_backend_pid() as pid`);
    await database.handle.pool.query('select pg_terminate_backend($1)', [r.rows[0]!.pid]);
    // The server's goodbye reaches the idle-in-transaction client as an 'error' event: without a
    // listener, Node throws it as an uncaught exception and the worker dies.
    await sleep(300);
    await tx.execute(sql`select 1`);
  });
  await expect(attempt).rejects.toThrow();
  // The pool throws the dead client away and the next query gets a good one.
  const again = await handle.db.execute<{ one: number }>(sql`select 1 as one`);
  expect(again.rows[0]!.one).toBe(1);
});

it('a query with no answer fails, its connection is dropped at once, and Postgres frees the abandoned transaction’s locks', async () => {
  const { proxy, url: viaProxy } = await proxyDatabase(database.url);
  // Postgres ends an idle transaction after 1 s; the client gives up on a silent query 5 s later.
  const handle = createDb(viaProxy, { max: 2, timeoutMs: 1000, applicationName: 'stall-test' });
  handles.push(handle);
  const heldLocks = async () => {
    const r = await database.handle.pool.query<{ n: number }>(
      `select count(*)::int as n from pg_locks where locktype = 'advisory' and objid = 4242 and granted`,
    );
    return r.rows[0]!.n;
  };
  try {
    const client = await handle.pool.connect();
    await client.query('begin');
    await client.query('select pg_advisory_xact_lock(4242)');
    expect(await heldLocks()).toBe(1);
    // The network goes silent: no reset, no answer.
    proxy.stall();
    await expect(client.query('select 1')).rejects.toThrow('Query read timeout');
    // The client dropped its connection: the rollback fails at once instead of queueing behind a
    // query that will never be answered (and timing out in its turn).
    await expect(client.query('rollback')).rejects.toThrow(/terminated|not queryable|closed/i);
    client.release(true);
    // Postgres ended the transaction its silent client left open: the lock is free again.
    await waitFor('the abandoned transaction to end', async () => (await heldLocks()) === 0, 10_000);
    // The pool gives out a new client, and it is answered.
    const again = await handle.db.execute<{ one: number }>(sql`select 1 as one`);
    expect(again.rows[0]!.one).toBe(1);
  } finally {
    await proxy.close();
  }
});

it('a statement running past the timeout is cancelled by Postgres: an ordinary failure, not an outage', async () => {
  const handle = createDb(database.url, { max: 1, timeoutMs: 1000 });
  handles.push(handle);
  const error = await handle.db.execute(sql`select pg_sleep(3)`).catch((e: unknown) => e);
  const root = rootCause(error);
  // Postgres' own cancellation (57014), before the client would have called the connection dead.
  expect(root.code).toBe('57014');
  // Not "Postgres is away": the job that ran it uses an attempt instead of holding every worker.
  expect(isConnectionError(root.code)).toBe(false);
  const again = await handle.db.execute<{ one: number }>(sql`select 1 as one`);
  expect(again.rows[0]!.one).toBe(1);
});

it('queries pipelined on one client each get their deadline counted from when the ones ahead are answered', async () => {
  // Client deadline 6 s (1 s + 5 s of grace), each statement well under the server's 1 s: seven
  // of them take 6.3 s in all, so the last one, issued at the start, waits longer than 6 s.
  const handle = createDb(database.url, { max: 1, timeoutMs: 1000 });
  handles.push(handle);
  const client = await handle.pool.connect();
  try {
    const sleeps = Array.from({ length: 7 }, () => client.query('select pg_sleep(0.9)'));
    const settled = await Promise.allSettled(sleeps);
    expect(settled.map((s) => s.status)).toEqual(Array(7).fill('fulfilled'));
    expect((await client.query<{ one: number }>('select 1 as one')).rows[0]!.one).toBe(1);
  } finally {
    client.release();
  }
});
