import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'drizzle-orm';
import { afterAll, expect, it } from 'vitest';
import { createDb } from '../db/client.js';
import { useTestDatabase } from './helpers.js';

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
