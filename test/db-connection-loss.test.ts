import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'drizzle-orm';
import { afterAll, expect, it } from 'vitest';
import { createDb } from '../db/client.js';
import { startTcpProxy } from './faults/tcp-proxy.js';
import { useTestDatabase } from './helpers.js';
import { waitFor } from './queue-helpers.js';

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

it('a query with no answer within the timeout fails, its connection is dropped and the transaction’s locks are freed', async () => {
  const target = new URL(database.url);
  const proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
  const viaProxy = new URL(database.url);
  viaProxy.host = `127.0.0.1:${proxy.port}`;
  const handle = createDb(viaProxy.toString(), { max: 2, timeoutMs: 500, applicationName: 'stall-test' });
  handles.push(handle);
  try {
    const attempt = handle.db.transaction(async (tx) => {
      await tx.execute(sql`select pg_advisory_xact_lock(4242)`);
      // The network goes silent: no reset, no answer.
      proxy.stall();
      await tx.execute(sql`select 1`);
    });
    // Fails with the timeout; the rollback behind it does not wait for an answer either.
    await expect(attempt).rejects.toThrow();
    // Postgres ends the abandoned transaction, so the lock it held is free again.
    await waitFor(
      'the abandoned transaction to end',
      async () => {
        // Taken and let go within one statement of its own.
        const r = await database.handle.pool.query<{ free: boolean }>(
          'select pg_try_advisory_xact_lock(4242) as free',
        );
        return r.rows[0]!.free;
      },
      10_000,
    );
    // The pool replaced the dropped client: the next query is answered.
    const again = await handle.db.execute<{ one: number }>(sql`select 1 as one`);
    expect(again.rows[0]!.one).toBe(1);
  } finally {
    await proxy.close();
  }
});
