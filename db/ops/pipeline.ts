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
