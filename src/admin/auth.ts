import { createHash, timingSafeEqual } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';
import { messagePage } from './html.js';

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Constant-time comparison (of digests, so lengths leak nothing either). */
export function tokenMatches(given: string, expected: string): boolean {
  return timingSafeEqual(digest(given), digest(expected));
}

/** The token from `Authorization: Bearer <token>` or Basic auth (any user name, the token as password). */
function presentedToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const bearer = /^Bearer\s+(\S+)$/i.exec(header);
  if (bearer) return bearer[1];
  const basic = /^Basic\s+([A-Za-z0-9+/=]+)$/i.exec(header);
  if (basic) {
    const decoded = Buffer.from(basic[1]!, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    return colon >= 0 ? decoded.slice(colon + 1) : undefined;
  }
  return undefined;
}

/**
 * Whom a request speaks for, named after its token: `operator` (`ADMIN_TOKEN`) may do everything,
 * `reader` (`ADMIN_READ_TOKEN`) may look but not act. The name is the audit trail's actor.
 */
export type AdminRole = 'operator' | 'reader';

/** The admin server's two tokens; either, both or neither may be set. */
export interface AdminTokens {
  /** `ADMIN_TOKEN`. */
  operator: string | undefined;
  /** `ADMIN_READ_TOKEN`. */
  reader: string | undefined;
}

/** The admin app's Hono environment: the role {@link requireToken} found. */
export type AdminEnv = { Variables: { role: AdminRole } };

/** What the reader is told on a route that acts. */
export const READ_ONLY_REFUSAL = 'the read token may look but not act; use ADMIN_TOKEN';

/**
 * Methods that only look. Every route that acts takes another method (the forms and the JSON API
 * POST, Bull Board PUTs and PATCHes), so the reader is refused by method, in one place: a new
 * route that acts cannot forget to refuse it.
 */
const LOOKING = new Set(['GET', 'HEAD']);

/** The role whose token `given` is, or undefined. Both tokens are compared, whichever matches. */
function roleOf(tokens: AdminTokens, given: string): AdminRole | undefined {
  const operator = tokens.operator !== undefined && tokenMatches(given, tokens.operator);
  const reader = tokens.reader !== undefined && tokenMatches(given, tokens.reader);
  return operator ? 'operator' : reader ? 'reader' : undefined;
}

const wantsHtml = (c: Context) => (c.req.header('accept') ?? '').toLowerCase().includes('text/html');

function refuseReader(c: Context, tokens: AdminTokens): Response {
  const unset =
    tokens.operator === undefined ? ' (ADMIN_TOKEN is not set on this server: nobody may act)' : '';
  if (wantsHtml(c)) {
    return c.html(
      messagePage('Refused: the read token', `${READ_ONLY_REFUSAL}${unset}. Nothing was done.`),
      403,
    );
  }
  return c.json({ error: `${READ_ONLY_REFUSAL}${unset}; nothing was done` }, 403);
}

/**
 * Guards the pages, the reads, the dashboard and the write routes: off (403) when neither token is
 * set; otherwise a bearer token or Basic auth whose password is a token (401 if none matches). The
 * reader is refused (403) on every method but GET and HEAD. Sets the `role` variable.
 */
export function requireToken(tokens: AdminTokens): MiddlewareHandler<AdminEnv> {
  return async (c, next) => {
    if (tokens.operator === undefined && tokens.reader === undefined) {
      return c.json(
        {
          error:
            'this route is off: set ADMIN_TOKEN (or ADMIN_READ_TOKEN, to look only) to enable the admin pages, reads, write routes and dashboard',
        },
        403,
      );
    }
    const given = presentedToken(c.req.header('authorization'));
    const role = given === undefined ? undefined : roleOf(tokens, given);
    if (role === undefined) {
      c.header('WWW-Authenticate', 'Basic realm="cards-sync", charset="UTF-8"');
      return c.json({ error: 'missing or wrong token: send Authorization: Bearer <ADMIN_TOKEN>' }, 401);
    }
    if (role === 'reader' && !LOOKING.has(c.req.method)) return refuseReader(c, tokens);
    c.set('role', role);
    await next();
  };
}
