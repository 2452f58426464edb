import { rootCause } from '../../db/errors.js';

// What a command says when Postgres is not there or not ready: one line with the fix. Apart from
// src/cli/common.ts so that the program's last-resort handler can use it without loading Redis.

/** `host:port` of a URL, for messages (never its user or password). */
export function where(url: string, fallbackPort: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || fallbackPort}`;
  } catch {
    return 'the configured address';
  }
}

/** A one-line, actionable explanation of a Postgres error, or undefined when it is not a known kind. */
export function describeDbError(error: unknown, databaseUrl: string): string | undefined {
  const code = rootCause(error).code;
  const name = URL.parse(databaseUrl)?.pathname ?? '';
  const pg = `Postgres at ${where(databaseUrl, '5432')}${name}`;
  if (code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'ETIMEDOUT' || code === 'EAI_AGAIN') {
    return `cannot reach ${pg} (${code}); start it (docker compose up -d postgres) or set DATABASE_URL`;
  }
  if (code === '3D000') return `${pg} does not exist; run \`cards-sync migrate\` first`;
  if (code === '42P01') return `the tables are missing in ${pg}; run \`cards-sync migrate\` first`;
  if (code === '28P01') return `${pg} refused the login; check the user and password in DATABASE_URL`;
  // pg_hba.conf said no (e.g. "no encryption": add sslmode=verify-full to DATABASE_URL); the server's
  // own words say which rule, and hold no secret.
  if (code === '28000')
    return `${pg} refused the connection: ${rootCause(error).message}; check pg_hba.conf and the sslmode in DATABASE_URL`;
  return undefined;
}
