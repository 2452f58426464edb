import { createHmac } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';
import { type AdminRole, tokenMatches } from './auth.js';
import { esc, messagePage } from './html.js';

/**
 * Cross-site request forgery protection for the admin page's forms (not the JSON API, which takes a
 * bearer token a browser never sends on its own).
 *
 * A browser that holds the operator's Basic-auth credentials sends them with any request to this
 * origin, including a form another site posts here. Two checks stop that:
 *
 * - every form carries `_csrf`, an HMAC-SHA256 of a fixed label keyed by `ADMIN_TOKEN`: another
 *   site can neither read it from our pages nor compute it. It is stateless, so every admin process
 *   with the same token agrees, and it never reveals the token;
 * - a request whose `Origin` names another host, or whose `Sec-Fetch-Site` is `cross-site`, is
 *   refused before its body is read.
 */

const LABEL = 'cards-sync admin form v1';

/** The `_csrf` value of every form, derived from the admin token. */
export function csrfToken(adminToken: string): string {
  return createHmac('sha256', adminToken).update(LABEL).digest('base64url');
}

/**
 * The `_csrf` value of the forms a page shows to `role`, or null for the reader, whose pages carry
 * no forms: the value is derived from `ADMIN_TOKEN` alone, and the guard refuses the reader's posts
 * before they reach the check anyway.
 */
export function formToken(role: AdminRole, adminToken: string | undefined): string | null {
  return role === 'operator' && adminToken !== undefined ? csrfToken(adminToken) : null;
}

/** The hidden form field carrying {@link csrfToken}. */
export function csrfField(token: string): string {
  return `<input type="hidden" name="_csrf" value="${esc(token)}">`;
}

/**
 * Why the request comes from another site, or undefined. Only the host is compared with `Origin`,
 * not the scheme, so that a proxy terminating TLS in front (browser `https:`, server `http:`) works;
 * such a proxy must pass the `Host` header through.
 */
function foreignOrigin(c: Context): string | undefined {
  if (c.req.header('sec-fetch-site')?.toLowerCase() === 'cross-site') {
    return 'the browser says this form was sent from another site (Sec-Fetch-Site: cross-site)';
  }
  const origin = c.req.header('origin');
  if (origin === undefined) return undefined;
  const host = URL.parse(origin)?.host;
  if (host === undefined || host === '' || host !== new URL(c.req.url).host) {
    return `the form was sent from another origin (${origin.slice(0, 100)}), not from this admin page`;
  }
  return undefined;
}

const refused = (c: Context, why: string) =>
  c.html(
    messagePage(
      'Refused: not sent from this admin page',
      `${why}. Nothing was done. Open the page again from /admin and submit the form there.`,
    ),
    403,
  );

/**
 * Guards a form route (after the token guard, which has refused the reader): same-site origin, an
 * `application/x-www-form-urlencoded` body (415 otherwise) and the right `_csrf` field (403).
 */
export function requireForm(adminToken: string | undefined): MiddlewareHandler {
  return async (c, next) => {
    if (adminToken === undefined) return refused(c, 'ADMIN_TOKEN is not set');
    const foreign = foreignOrigin(c);
    if (foreign !== undefined) return refused(c, foreign);
    const type = (c.req.header('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
    if (type !== 'application/x-www-form-urlencoded') {
      return c.html(
        messagePage(
          'Unsupported form encoding',
          'send the form as application/x-www-form-urlencoded, as the admin page does. Nothing was done.',
        ),
        415,
      );
    }
    const given = (await c.req.parseBody())._csrf;
    if (typeof given !== 'string' || !tokenMatches(given, csrfToken(adminToken))) {
      return refused(
        c,
        'the form has no valid _csrf field (a page opened before ADMIN_TOKEN changed, or a form from elsewhere)',
      );
    }
    await next();
  };
}

/** The string fields of a form a {@link requireForm} route already read (the body is cached). */
export async function readForm(c: Context): Promise<Record<string, string>> {
  const body = await c.req.parseBody();
  const fields: Record<string, string> = {};
  for (const [name, value] of Object.entries(body)) if (typeof value === 'string') fields[name] = value;
  return fields;
}
