/** What every admin page shares: escaping, the one time format, the page frame. */
import { formatTime, type Moment, toDate } from '../shared/index.js';

/** Escapes text for HTML content and double- or single-quoted attributes. */
export const esc = (v: unknown) =>
  String(v ?? '').replace(
    /[&<>"']/g,
    (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[ch]!,
  );

/** A moment as HTML: {@link formatTime} in a `<time>` element carrying the exact instant. */
export function time(value: Moment): string {
  const date = toDate(value);
  if (date === undefined) return esc(formatTime(value));
  return `<time datetime="${date.toISOString()}">${formatTime(date)}</time>`;
}

const STYLE = `
body{font:15px/1.4 system-ui,sans-serif;margin:2rem;max-width:1100px;color:#222}
h1{font-size:1.5rem}h2{font-size:1.1rem;margin-top:1.8rem;border-bottom:1px solid #ddd}
nav{display:flex;gap:1rem;align-items:center;margin-bottom:1rem}
.tiles{display:flex;gap:1rem;flex-wrap:wrap}.tile{border:1px solid #ddd;border-radius:6px;padding:.6rem 1rem;min-width:7rem}
.tile b{display:block;font-size:1.6rem}.alert{color:#b71c1c;font-weight:600}
.flash{background:#e3f2fd;border:1px solid #90caf9;border-radius:6px;padding:.5rem 1rem}
.flash.warn{background:#fff8e1;border-color:#ffcc80}.flash.done{background:#e8f5e9;border-color:#a5d6a7}
.bar{background:#eee;height:12px;border-radius:6px;overflow:hidden;width:560px}.bar div{background:#1565c0;height:12px}
svg text{font-size:13px}svg text.n{font-weight:600}
table{border-collapse:collapse;font-size:14px}td,th{padding:.25rem .7rem;border-bottom:1px solid #eee;text-align:left;vertical-align:top}.wide{overflow-x:auto;max-width:100%}
time,.nowrap{white-space:nowrap}tr.new,tr.changed{background:#fff59d}tr.removed td{color:#888}
.actions,#pause-form,#resume-form{margin:1rem 0}form.inline{display:inline}input[type=text],input[type=search]{padding:.3rem;min-width:18rem}
button{padding:.3rem .9rem;cursor:pointer}dl{display:grid;grid-template-columns:max-content auto;gap:.2rem 1rem}dt{color:#555}
`;

/** Options of {@link layout}. */
export interface LayoutOptions {
  title: string;
  body: string;
  /** Adds `<meta http-equiv="refresh">` with this many seconds. Default: none. */
  refreshSeconds?: number;
  /** Extra markup for `<head>`. Default: none. */
  head?: string;
  /** Shows the top navigation (back to the overview, search). Default true. */
  nav?: boolean;
}

/** The search box that finds a subscriber by id or e-mail. */
export function searchForm(): string {
  return (
    '<form id="search" method="get" action="/admin/subscribers" role="search">' +
    `<input type="search" name="q" placeholder="subscriber id or e-mail" aria-label="subscriber id or e-mail" required> ` +
    '<button type="submit">Find subscriber</button></form>'
  );
}

/** Stands where a form would be, on the pages the reader (`ADMIN_READ_TOKEN`) sees. */
export function readOnlyNote(what: string): string {
  return (
    `<p class="read-only flash warn">Signed in with the read token: you may look but not ${esc(what)}. ` +
    'That takes ADMIN_TOKEN.</p>'
  );
}

/** A whole admin page. */
export function layout(o: LayoutOptions): string {
  const refresh = o.refreshSeconds ? `<meta http-equiv="refresh" content="${o.refreshSeconds}">` : '';
  const nav =
    o.nav === false
      ? ''
      : `<nav><a href="/admin">← overview</a> <a href="/admin/queues">jobs dashboard</a> ${searchForm()}</nav>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(o.title)}</title>
${refresh}${o.head ?? ''}<style>${STYLE}</style></head><body>
${nav}${o.body}
</body></html>`;
}

/** A page that only says something, such as why a request was refused. */
export function messagePage(title: string, message: string): string {
  return layout({
    title: `${title} — cards-sync`,
    body: `<h1>${esc(title)}</h1><p id="message" class="alert">${esc(message)}</p>`,
  });
}
