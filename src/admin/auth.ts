import { createHash, timingSafeEqual } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Constant-time comparison (of digests, so lengths leak nothing either). */
export function tokenMatches(given: string, expected: string): boolean {
  return timingSafeEqual(digest(given), digest(expected));
}

/** The token from `Authorization: Bearer <token>` or Basic auth (any user name, the token as password). */
export function presentedToken(header: string | undefined): string | undefined {
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
 * Guards the write routes, the dashboard and the overview: off (403) without `ADMIN_TOKEN`;
 * otherwise a bearer token or Basic auth whose password is the token.
 */
export function requireToken(adminToken: string | undefined): MiddlewareHandler {
  return async (c, next) => {
    if (adminToken === undefined) {
      return c.json(
        { error: 'this route is off: set ADMIN_TOKEN to enable the admin write routes and dashboard' },
        403,
      );
    }
    const given = presentedToken(c.req.header('authorization'));
    if (given === undefined || !tokenMatches(given, adminToken)) {
      c.header('WWW-Authenticate', 'Basic realm="cards-sync", charset="UTF-8"');
      return c.json({ error: 'missing or wrong token: send Authorization: Bearer <ADMIN_TOKEN>' }, 401);
    }
    await next();
  };
}
