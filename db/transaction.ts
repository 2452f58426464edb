import type pg from 'pg';

// The unit of work: a client checked out of the pool for a caller's steps, and a transaction on it.
// The checkout, the release (a client that broke is discarded, not handed back) and `begin`,
// `commit` and `rollback` are here, in db/, and nowhere above it (test/contracts/layers.test.ts).
// `commit` and `rollback` stay offered for the batch write, which opens its transaction in its
// first round trip (db/sync/batch-read.ts) and pipelines its commit behind its writes in its last
// (src/sync/apply-cards.ts), inside `withClient`.

type Queryable = Pick<pg.ClientBase, 'query'>;

/** `begin` on `client`. */
function begin(client: Queryable): Promise<pg.QueryResult> {
  return client.query('begin');
}

/** `commit` on `client`; its result's `command` says whether the server committed (`COMMIT`) or rolled back. */
export function commit(client: Queryable): Promise<pg.QueryResult> {
  return client.query('commit');
}

/** Whether the server answered a `commit` by committing (a failed transaction's `commit` rolls back). */
export function committedIn(result: pg.QueryResult): boolean {
  return result.command === 'COMMIT';
}

/** `rollback` on `client`. */
export function rollback(client: Queryable): Promise<pg.QueryResult> {
  return client.query('rollback');
}

/** What `withClient` lends its callback besides the client. */
export interface Checkout {
  /** Discard the client at release instead of handing it back (it failed, or could not roll back). */
  discard(error: Error): void;
}

/**
 * Runs `fn` on a client of `pool` and releases it after, whatever `fn` did: a client that emitted
 * an error meanwhile (a connection reset between two statements), or that `fn` said to discard, is
 * thrown away rather than handed back for reuse.
 */
export async function withClient<T>(
  pool: pg.Pool,
  fn: (client: pg.PoolClient, checkout: Checkout) => Promise<T>,
): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  const onError = (error: Error) => {
    broken = error;
  };
  client.on('error', onError);
  try {
    return await fn(client, {
      discard(error) {
        broken ??= error;
      },
    });
  } finally {
    client.removeListener('error', onError);
    client.release(broken);
  }
}

/**
 * Runs `fn` in one transaction on a client of `pool`: `begin`, then `commit` when `fn` returns or
 * `rollback` when it throws (a client that cannot even roll back is discarded). What `fn` returns
 * is returned once the commit is through.
 */
export function withTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  return withClient(pool, async (client, checkout) => {
    await begin(client);
    try {
      const result = await fn(client);
      await commit(client);
      return result;
    } catch (error) {
      await rollback(client).catch((e: Error) => checkout.discard(e));
      throw error;
    }
  });
}
