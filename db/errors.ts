/**
 * The innermost error of a chain: Drizzle wraps every driver error in a `DrizzleQueryError`
 * whose message quotes the SQL and its parameters (card tokens among them), so only the root's
 * code and message may be reported.
 */
export function rootCause(error: unknown): { code?: string; message: string } {
  let e = error as { code?: unknown; cause?: unknown; message?: unknown } | undefined;
  for (let i = 0; i < 8 && e && typeof e.code !== 'string' && e.cause; i++) e = e.cause as typeof e;
  return {
    ...(typeof e?.code === 'string' ? { code: e.code } : {}),
    message: typeof e?.message === 'string' ? e.message : String(e),
  };
}

/** Errors that mean "Postgres is not there right now", not "this write is wrong". */
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
    ].includes(code) || code.startsWith('08')
  );
}
