import type { MiddlewareHandler } from 'hono';

// Requests that act, from this server's own pages only. A browser that has cached the operator's
// Basic credentials (the README's `http://ops:TOKEN@host/…` form) sends them with any request to
// this host, a form posted by another site included: a `text/plain` form can carry JSON, and
// Bull Board parses any body as JSON. So a request that acts must say it comes from this origin
// (browsers set `Origin` and `Sec-Fetch-Site` themselves, and no page can forge either), and must
// be JSON, which no form can send without a CORS preflight that this server never grants.

const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Why a request that acts is refused, or undefined when it may go on. */
function crossSiteProblem(headers: {
  method: string;
  host: string | undefined;
  origin: string | undefined;
  fetchSite: string | undefined;
  contentType: string | undefined;
}): { status: 403 | 415; message: string } | undefined {
  if (SAFE.has(headers.method.toUpperCase())) return undefined;
  const site = headers.fetchSite?.toLowerCase();
  if (site !== undefined && site !== 'same-origin') {
    return { status: 403, message: `a request from another site (Sec-Fetch-Site: ${site}) may not act here` };
  }
  if (headers.origin !== undefined) {
    const host = URL.parse(headers.origin)?.host;
    if (host === undefined || host !== headers.host) {
      return { status: 403, message: 'a request from another origin may not act here' };
    }
  } else if (site === undefined) {
    return {
      status: 403,
      message:
        'a request that acts must come from this server’s pages (Origin or Sec-Fetch-Site); scripts use POST /api/resync',
    };
  }
  const type = headers.contentType?.split(';')[0]?.trim().toLowerCase();
  if (type !== 'application/json') {
    return { status: 415, message: 'a request that acts must be sent as application/json' };
  }
  return undefined;
}

/** Refuses, before anything runs, a request that acts and does not come from this origin as JSON. */
export function sameOriginJson(): MiddlewareHandler {
  return async (c, next) => {
    const problem = crossSiteProblem({
      method: c.req.method,
      host: c.req.header('host') ?? new URL(c.req.url).host,
      origin: c.req.header('origin'),
      fetchSite: c.req.header('sec-fetch-site'),
      contentType: c.req.header('content-type'),
    });
    if (problem) return c.json({ error: problem.message }, problem.status);
    await next();
  };
}

/** No page of this server may be framed by another (clickjacking): on every response, errors included. */
export function noFraming(): MiddlewareHandler {
  return async (c, next) => {
    await next();
    c.res.headers.set('x-frame-options', 'DENY');
    const policy = c.res.headers.get('content-security-policy');
    if (policy === null) c.res.headers.set('content-security-policy', "frame-ancestors 'none'");
    else if (!/frame-ancestors/i.test(policy)) {
      c.res.headers.set('content-security-policy', `${policy}; frame-ancestors 'none'`);
    }
  };
}
