import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { QUERY_TIMEOUT, rootCause } from './errors.js';
import { declareKnownMigration } from './fence.js';
import * as schema from './schema/index.js';

/** The Drizzle handle; `$client` is its pool, which only db/ reaches (`poolOf`). */
export type Db = NodePgDatabase<typeof schema> & { $client: pg.Pool };

/**
 * The pool under a Drizzle handle, for the statements of db/ that take one (a read model, a unit of
 * work: db/transaction.ts). Code above db/ asks here rather than reaching into the handle.
 */
export function poolOf(db: Db): pg.Pool {
  return db.$client;
}

/** Thrown when Postgres hands back a bigint outside JavaScript's safe-integer range. */
export class UnsafeBigintError extends Error {
  override readonly name = 'UnsafeBigintError';
  readonly code = 'unsafe_bigint';
}

function parseSafeBigint(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n)) {
    throw new UnsafeBigintError(
      'a bigint column holds a value beyond 2^53−1, which JavaScript cannot represent exactly',
    );
  }
  return n;
}

let typeParserInstalled = false;

/** Options of {@link createDb}. */
export interface DbOptions {
  /** Most connections in the pool. Default 10. */
  max?: number;
  /** Name shown in `pg_stat_activity`. Default `cards-sync`. */
  applicationName?: string;
  /**
   * Postgres cancels a statement running this long and ends a transaction left idle this long; a
   * query with no answer at all 5 s later fails and its connection is dropped
   * (`DATABASE_TIMEOUT_MS`), ms. 0 = none. Default 30000.
   */
  timeoutMs?: number;
}

/** How much longer than the server's deadline the client waits before it calls a connection dead. */
const CLIENT_GRACE_MS = 5000;

/**
 * A pg client class that drops its connection when a query times out. pg fails the caller but
 * leaves the query active, so every later query on that client (a transaction's rollback first)
 * would queue behind an answer that may never come (a silent network, a frozen host), and a
 * client handed back to the pool would stay stuck. Without its connection the client fails at
 * once and the pool replaces it. Queries pipelined behind it on the same client fail with it (a
 * commit already sent may still be carried out by a server that was only slow, as with any commit
 * whose answer is lost; a retried sync then finds its cards stored and changes nothing).
 *
 * pg starts a query's timer when the query is issued, not when the server reaches it, so a query
 * pipelined behind others also waits for them: its deadline is `deadlineMs` once for itself and
 * once for every query still unanswered ahead of it. A live server cancels each statement itself
 * (`statement_timeout`) well before that.
 */
function droppingClient(deadlineMs: number): typeof pg.Client {
  const ahead = new WeakMap<pg.Client, number>();
  class DroppingClient extends pg.Client {}
  DroppingClient.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    const waiting = ahead.get(this) ?? 0;
    if (deadlineMs > 0 && waiting > 0) args[0] = withDeadline(args[0], deadlineMs * (waiting + 1));
    const result = plainQuery.apply(this, args);
    if (result instanceof Promise) {
      ahead.set(this, waiting + 1);
      const answered = () => ahead.set(this, (ahead.get(this) ?? 1) - 1);
      result.then(answered, (error: unknown) => {
        answered();
        if (rootCause(error).code === QUERY_TIMEOUT) this.connection.stream.destroy();
      });
    }
    return result;
  } as typeof pg.Client.prototype.query;
  return DroppingClient;
}
const plainQuery = pg.Client.prototype.query as (this: pg.Client, ...args: unknown[]) => unknown;

/** A query's text or config with its own client-side deadline (pg reads `query_timeout` from it). */
function withDeadline(config: unknown, ms: number): unknown {
  if (typeof config === 'string') return { text: config, query_timeout: ms };
  // A plain config object, not a submittable query (a cursor, a stream) that pg drives itself.
  if (config !== null && typeof config === 'object' && !('submit' in config)) {
    return { ...config, query_timeout: ms };
  }
  return config;
}

export interface DbHandle {
  db: Db;
  pool: pg.Pool;
  close(): Promise<void>;
}

/** A connection pool and its Drizzle handle. Bigints are read as numbers, guarded against overflow. */
export function createDb(databaseUrl: string, options: DbOptions = {}): DbHandle {
  if (!typeParserInstalled) {
    // Drizzle reads int8 through pg's global parser, so the guard must be global too.
    pg.types.setTypeParser(pg.types.builtins.INT8, parseSafeBigint);
    typeParserInstalled = true;
  }
  const timeoutMs = options.timeoutMs ?? 30_000;
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max: options.max ?? 10,
    application_name: options.applicationName ?? 'cards-sync',
    connectionTimeoutMillis: 10_000,
    Client: droppingClient(timeoutMs > 0 ? timeoutMs + CLIENT_GRACE_MS : 0),
    // Queries issued together on one client go out together (node-postgres pipelining): the write
    // path sends its write and its commit in one round trip. Code that awaits each query in turn
    // behaves as without it.
    pipeline: true,
    // Later than the server's own deadline below: a slow but live Postgres cancels the statement
    // itself (57014, connection kept); only a silent one is left to this.
    ...(timeoutMs > 0 ? { query_timeout: timeoutMs + CLIENT_GRACE_MS } : {}),
    // Set per session once connected, before the pool hands the client out (as startup parameters
    // PgBouncer would refuse them). A transaction whose client went silent holds its locks (a
    // subscriber's advisory lock among them) only this long. The release declares what it knows
    // to the writer fence (db/fence.ts) in the same round trip.
    onConnect: async (client: pg.ClientBase) => {
      await client.query(
        timeoutMs > 0
          ? `set statement_timeout = ${timeoutMs}; set idle_in_transaction_session_timeout = ${timeoutMs}; ${declareKnownMigration()}`
          : declareKnownMigration(),
      );
    },
  });
  // An idle client losing its connection must not crash the process; the next query reconnects.
  pool.on('error', () => {});
  // Nor may a checked-out one (pg removes the pool's listener while a client is lent out): the
  // query in flight or the next one fails with the loss, and the pool discards the client.
  pool.on('connect', (client) => client.on('error', () => {}));
  return { db: drizzle(pool, { schema }), pool, close: () => pool.end() };
}

/** A transaction handle, for operations that must run inside one. */
export type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];

/** Either the pool-backed handle or a transaction. */
export type Executor = Db | Tx;
