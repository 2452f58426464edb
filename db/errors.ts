/**
 * The innermost error of a chain: Drizzle wraps every driver error in a `DrizzleQueryError`
 * whose message quotes the SQL and its parameters (card tokens among them), so only the root's
 * code and message may be reported.
 */
export function rootCause(error: unknown): { code?: string; message: string } {
  let e = error as { code?: unknown; cause?: unknown; message?: unknown } | undefined;
  for (let i = 0; i < 8 && e && typeof e.code !== 'string' && e.cause; i++) e = e.cause as typeof e;
  const message = typeof e?.message === 'string' ? e.message : String(e);
  // pg's own query timeout (`query_timeout`) carries no code: it is named here so that callers can
  // branch on it.
  const code =
    typeof e?.code === 'string' ? e.code : message === 'Query read timeout' ? QUERY_TIMEOUT : undefined;
  return { ...(code !== undefined ? { code } : {}), message };
}

/** The code {@link rootCause} gives pg's client-side query timeout (`DATABASE_TIMEOUT_MS`). */
export const QUERY_TIMEOUT = 'QUERY_TIMEOUT';

/**
 * Errors that mean "Postgres is not there right now", not "this write is wrong": connection
 * failures, a query that got no answer at all (not even the server's own cancellation at
 * `DATABASE_TIMEOUT_MS`), and a session the server ended for idling in a transaction (25P03). A
 * statement the server cancelled for running too long (57014) is not one of them: it is retried
 * with the job's attempts, like any other failed write, so a write that is always too slow ends.
 */
export function isConnectionError(code: string | undefined): boolean {
  if (code === undefined) return false;
  return (
    [
      'ECONNREFUSED',
      'ECONNRESET',
      'ETIMEDOUT',
      'EPIPE',
      'ENOTFOUND',
      'EAI_AGAIN',
      '57P01',
      '57P02',
      '57P03',
      '53300',
      '25P03',
      QUERY_TIMEOUT,
    ].includes(code) || code.startsWith('08')
  );
}
