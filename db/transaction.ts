import type pg from 'pg';

// The statements that open and close a transaction on a client a caller checked out of the pool,
// for callers outside db/ that run their own steps between them (the fan-out, a replay, the batch
// write): the client's checkout, its release and what runs inside stay the caller's.

type Queryable = Pick<pg.ClientBase, 'query'>;

/** `begin` on `client`. */
export function begin(client: Queryable): Promise<pg.QueryResult> {
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
