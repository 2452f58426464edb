import type pg from 'pg';

// Queries pipelined on one client (the pool runs node-postgres in pipeline mode): sent together,
// answered in order, in one round trip.

/**
 * Waits for queries pipelined on one client and returns their results. When one fails, the error
 * thrown is the first in sending order: the ones behind it failed only because it aborted the
 * transaction. Every promise is waited for, so none is left to reject unhandled.
 */
export async function allInOrder<T extends readonly unknown[]>(
  pending: readonly [...{ [K in keyof T]: Promise<T[K]> }],
): Promise<T> {
  const settled = await Promise.allSettled(pending);
  for (const s of settled) if (s.status === 'rejected') throw s.reason;
  return settled.map((s) => (s as PromiseFulfilledResult<unknown>).value) as unknown as T;
}

/**
 * Issues queries on one pipelined client with its socket corked, so that they leave in one write.
 * pg corks each query's own messages but sends every query apart: the five queries of a batch's
 * read were five writes, each a system call that, on loopback, also carries the delivery to the
 * server. The queries must be issued synchronously by `issue` (pg submits a pipelined query as it
 * is called); what `issue` returns is returned.
 */
export function sentTogether<T>(client: pg.PoolClient, issue: () => T): T {
  // A pooled client is a pg.Client; its type leaves the connection out.
  const stream = (client as unknown as pg.Client).connection.stream;
  stream.cork();
  try {
    return issue();
  } finally {
    stream.uncork();
  }
}
