import type pg from 'pg';
import { CHANGES_CHANNEL } from './outbox-sql.js';

// Wake-ups for long polls: one LISTEN connection per process, held only while someone waits. The
// outbox statement NOTIFYs CHANGES_CHANNEL in the writer's transaction, so the notification
// arrives at its commit.

/** LISTEN on CHANGES_CHANNEL on `client`. */
async function listenForChanges(client: Pick<pg.ClientBase, 'query'>): Promise<void> {
  await client.query(`listen ${CHANGES_CHANNEL}`);
}

/** UNLISTEN CHANGES_CHANNEL on `client`, before it goes back to the pool. */
async function unlistenChanges(client: Pick<pg.ClientBase, 'query'>): Promise<void> {
  await client.query(`unlisten ${CHANGES_CHANNEL}`);
}

export interface ChangeSignal {
  /**
   * Listens (resolved once LISTEN is in effect); `woken` resolves true at the next notification,
   * false after `ms`, on `cancel()` or when `signal` aborts. Arm before reading the feed, so that
   * an event committed between the read and the wait still wakes.
   */
  arm(ms: number, signal?: AbortSignal): Promise<{ woken: Promise<boolean>; cancel(): void }>;
  /** Notifications received so far (tests check a wait ended because of one). */
  readonly received: number;
  close(): Promise<void>;
}

/** The LISTEN connection: `drop` gives it back to the pool once (with the error that broke it, if any). */
interface Listener {
  client: pg.PoolClient;
  dropped(): boolean;
  drop(error?: Error): void;
}

export function createChangeSignal(pool: pg.Pool): ChangeSignal {
  let client: Promise<Listener> | undefined;
  let waiters = new Set<() => void>();
  let received = 0;
  const onNotification = (m: pg.Notification) => {
    if (m.channel !== CHANGES_CHANNEL) return;
    received++;
    const woken = waiters;
    waiters = new Set();
    for (const wake of woken) wake();
  };
  const listen = () => {
    if (client === undefined) {
      const pending = pool.connect().then(async (c) => {
        let dropped = false;
        const listener: Listener = {
          client: c,
          dropped: () => dropped,
          drop(error) {
            if (dropped) return;
            dropped = true;
            c.removeListener('notification', onNotification);
            // A healthy client goes back to the pool for reuse: left on it, this handler would be
            // one more on every later checkout (Node warns at 11). A broken one is discarded, and
            // keeps it for any error still to come.
            if (error === undefined) c.removeListener('error', onError);
            c.release(error ?? false);
          },
        };
        c.on('notification', onNotification);
        // A broken listener goes back to the pool (which discards it) and is forgotten; the next
        // wait makes another. Kept checked out, it would hold a pool slot for good and the pool's
        // end() would wait for it forever (a worker that cannot stop after a Postgres restart).
        const onError = (error: Error) => {
          if (client === pending) client = undefined;
          listener.drop(error);
        };
        c.on('error', onError);
        try {
          await listenForChanges(c);
        } catch (error) {
          listener.drop(error as Error);
          throw error;
        }
        return listener;
      });
      client = pending;
      pending.catch(() => {
        if (client === pending) client = undefined;
      });
    }
    return client;
  };
  const release = async () => {
    if (waiters.size > 0 || client === undefined) return;
    const pending = client;
    client = undefined;
    const listener = await pending.catch(() => undefined);
    if (!listener || listener.dropped()) return;
    try {
      await unlistenChanges(listener.client);
      listener.drop();
    } catch (error) {
      listener.drop(error as Error);
    }
  };
  return {
    get received() {
      return received;
    },
    async arm(ms, signal) {
      const { promise: woken, resolve: wake } = Promise.withResolvers<boolean>();
      const onWake = () => finish(true);
      const onAbort = () => finish(false);
      const timer = setTimeout(() => finish(false), Math.max(0, ms));
      const finish = (value: boolean) => {
        clearTimeout(timer);
        waiters.delete(onWake);
        signal?.removeEventListener('abort', onAbort);
        wake(value);
        // Released once nobody waits; the next wait listens again.
        setImmediate(() => void release());
      };
      waiters.add(onWake);
      signal?.addEventListener('abort', onAbort, { once: true });
      // Listening before the caller reads the feed: a commit after the read still wakes it. A
      // listener that cannot connect leaves the wait to its timer.
      await listen().catch(() => undefined);
      return { woken, cancel: () => finish(false) };
    },
    async close() {
      waiters.clear();
      await release();
    },
  };
}
