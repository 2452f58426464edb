import { createHash } from 'node:crypto';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { HonoAdapter } from '@bull-board/hono';
import { serveStatic } from '@hono/node-server/serve-static';
import type { Queue } from 'bullmq';
import { Hono, type MiddlewareHandler } from 'hono';
import type { Db } from '../../db/client.js';
import type { Logger } from '../logging/index.js';
import { auditRequest } from './audit.js';
import type { AdminEnv } from './auth.js';
import { sameOriginJson } from './same-origin.js';

// Bull Board (the jobs dashboard) as mounted here: its entry page served without links to other
// origins, under a Content-Security-Policy that allows only this server, and working as well with
// the token in the URL as with the browser's log-in prompt.

/**
 * A page whose URL holds credentials (`http://ops:TOKEN@host/admin/queues`) cannot `fetch` a
 * relative URL (a TypeError), so Bull Board shows "Loading" for a long while and then message keys
 * instead of its texts. The browser has cached the Basic credentials of that first navigation, so
 * the page reloads itself without them in the URL.
 * `document.URL`, because Chromium strips the credentials from `location.href` (and `Location`
 * has no `username`), though not from the URL that relative ones resolve against.
 */
const DROP_URL_CREDENTIALS =
  "const u=new URL(document.URL);if(u.username||u.password){u.username='';u.password='';location.replace(u.href)}";

/**
 * Bull Board's buttons send most of their requests (retry, promote, pause…) with no body and so
 * with no Content-Type, and every request that acts here must be JSON (same-origin.ts): its
 * requests that act get `Content-Type: application/json`, unless they carry one.
 */
const JSON_WRITES =
  'const o=XMLHttpRequest.prototype.open,h=XMLHttpRequest.prototype.setRequestHeader,s=XMLHttpRequest.prototype.send;' +
  'XMLHttpRequest.prototype.open=function(m,...a){this.__w=!/^(GET|HEAD)$/i.test(m);this.__t=false;return o.call(this,m,...a)};' +
  'XMLHttpRequest.prototype.setRequestHeader=function(n,v){if(/^content-type$/i.test(n))this.__t=true;return h.call(this,n,v)};' +
  "XMLHttpRequest.prototype.send=function(b){if(this.__w&&!this.__t)h.call(this,'Content-Type','application/json');return s.call(this,b)}";

/** The one inline script of the board's page. */
const PAGE_SCRIPT = `${DROP_URL_CREDENTIALS};${JSON_WRITES}`;

/** Links to another origin: Bull Board's web fonts (its CSS falls back to system fonts). */
const EXTERNAL_LINK = /<link\b[^>]*\bhref\s*=\s*["']?(?:[a-z][a-z0-9+.-]*:)?\/\/[^>]*>\s*/gi;

/** Bull Board's entry page without links to other origins, and {@link PAGE_SCRIPT} first. */
function rewriteBoardPage(html: string): string {
  return html
    .replace(EXTERNAL_LINK, '')
    .replace(/<head\b[^>]*>/i, (head) => `${head}<script>${PAGE_SCRIPT}</script>`);
}

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('base64');

/**
 * This server only, for everything. Scripts: Bull Board's files and our one inline script, by
 * hash. Styles may be inline: Bull Board styles its "Loading" placeholder and its Redis logo
 * inline, and its job-data editor (CodeMirror) writes a `<style>` element at run time, without a
 * nonce. Inline CSS runs no script and, with every other source `'self'`, reaches no other origin.
 */
const BOARD_POLICY = [
  "default-src 'self'",
  `script-src 'self' 'sha256-${sha256(PAGE_SCRIPT)}'`,
  "style-src 'self' 'unsafe-inline'",
  "object-src 'none'",
  "base-uri 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** Sets {@link BOARD_POLICY} on every dashboard response, and rewrites the HTML entry page. */
function boardPage(): MiddlewareHandler {
  return async (c, next) => {
    await next();
    if ((c.res.headers.get('content-type') ?? '').toLowerCase().startsWith('text/html')) {
      const html = rewriteBoardPage(await c.res.text());
      // Hono carries the old response's headers over to the new one.
      c.res = new Response(html, { status: c.res.status, headers: c.res.headers });
      c.res.headers.delete('content-length');
    }
    c.res.headers.set('content-security-policy', BOARD_POLICY);
  };
}

function boardPlugin(basePath: string, queues: readonly Queue[], readOnlyMode: boolean) {
  const board = new HonoAdapter(serveStatic);
  createBullBoard({
    queues: queues.map((q) => new BullMQAdapter(q, { readOnlyMode })),
    serverAdapter: board,
  });
  board.setBasePath(basePath);
  return board.registerPlugin();
}

/**
 * Mounts Bull Board over `queues` at `basePath`, behind `guard`: the operator's board, whose
 * every write that succeeds leaves an audit row (`dashboard`, with the route and its parameters),
 * and for the reader the same pages over read-only queues (no retry, remove, promote, clean or
 * pause buttons). The guard has already refused the reader every method that acts.
 */
export function mountBoard(
  app: Hono<AdminEnv>,
  basePath: string,
  queues: readonly Queue[],
  guard: MiddlewareHandler<AdminEnv>,
  deps: { db: Db; logger: Logger },
) {
  const readOnly = new Hono().route(basePath, boardPlugin(basePath, queues, true));
  // `/*` matches the base path itself too.
  app.use(`${basePath}/*`, boardPage(), guard, sameOriginJson(), async (c, next) => {
    if (c.get('role') === 'reader') return readOnly.fetch(c.req.raw, c.env);
    await next();
    // After `next`, the request's route and parameters are those of the Bull Board route that answered.
    if (c.req.method !== 'GET' && c.req.method !== 'HEAD' && c.res.status < 400) {
      await auditRequest(deps, c, 'dashboard', c.req.param());
    }
  });
  app.route(basePath, boardPlugin(basePath, queues, false));
}
