import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { afterAll, afterEach, beforeAll, inject } from 'vitest';
import { createDb, type DbHandle } from '../../db/client.js';
import { onMaintenanceDb, withDatabase } from '../../db/databases.js';
import { createLogger, type Logger } from '../../src/logging/index.js';
import { archiveLog } from './log-archive.js';

export { withDatabase };

/** Runs one statement on the server's maintenance database (create/drop database). */
export async function adminQuery(sql: string): Promise<void> {
  await onMaintenanceDb(inject('templateUrl'), sql);
}

/** A fresh database cloned from the migrated template; dropped with `drop()`. */
export async function createTestDatabase(): Promise<{ url: string; name: string; drop(): Promise<void> }> {
  const template = new URL(inject('templateUrl')).pathname.slice(1);
  const name = `cards_sync_test_${randomBytes(6).toString('hex')}`;
  for (let attempt = 0; ; attempt++) {
    try {
      await adminQuery(`create database ${name} template ${template}`);
      break;
    } catch (error) {
      // 55006: the template is busy (another clone starting at the same instant); try again.
      if ((error as { code?: string }).code !== '55006' || attempt > 20) throw error;
      await new Promise((r) => setTimeout(r, 50 + Math.random() * 100));
    }
  }
  // No JIT: the tests' tables are small, but a few statements (the as-of function's) are planned
  // above jit_above_cost, and compiling them cost test/integration/history-as-of.test.ts 36 s
  // where it runs in 20 without. Every connection to the clone, a CLI child's too, takes it.
  await adminQuery(`alter database ${name} set jit = off`);
  const url = withDatabase(inject('templateUrl'), name);
  return { url, name, drop: () => adminQuery(`drop database if exists ${name} with (force)`) };
}

/** One cloned database for the whole test file, with a Drizzle handle. */
export function useTestDatabase(): { url: string; handle: DbHandle } {
  const ctx = {} as { url: string; handle: DbHandle };
  let drop: () => Promise<void> = async () => {};
  beforeAll(async () => {
    const created = await createTestDatabase();
    drop = created.drop;
    ctx.url = created.url;
    ctx.handle = createDb(created.url, { max: 8 });
  });
  afterAll(async () => {
    await ctx.handle?.close();
    await drop();
  });
  return ctx;
}

/** A logger whose lines are kept in memory, to assert on them (and on what they never hold). */
export function captureLogger(level: 'info' | 'debug' = 'debug'): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk, _enc, done) {
      archiveLog('in-process logger', chunk.toString());
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      done();
    },
  });
  return { logger: createLogger({ level, destination }), lines };
}

/** Clean-ups registered during a test, run after it in reverse order. */
export function useCleanups(): (() => Promise<unknown>)[] {
  const cleanups: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  return cleanups;
}
