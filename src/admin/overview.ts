import type { FreshnessBuckets } from '../../db/ops/admin.js';
import type { RefreshRun } from '../../db/ops/refresh-runs.js';
import type { DataStatus } from '../../db/ops/status.js';
import type { QueueStatus } from '../commands/status.js';

const esc = (v: unknown) =>
  String(v ?? '').replace(
    /[&<>"']/g,
    (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[ch]!,
  );

function freshnessChart(b: FreshnessBuckets): string {
  const bars = [
    ['within 1 h', b.within1h, '#2e7d32'],
    ['1 h – 24 h', b.within24h, '#7cb342'],
    ['1 – 7 days', b.within7d, '#f9a825'],
    ['older', b.older, '#e65100'],
    ['never', b.never, '#9e9e9e'],
  ] as const;
  const max = Math.max(1, ...bars.map(([, n]) => n));
  const rows = bars
    .map(([label, n, color], i) => {
      const w = Math.round((n / max) * 360);
      const y = i * 34;
      return (
        `<g data-bucket="${esc(label)}" data-count="${n}"><text x="0" y="${y + 20}">${esc(label)}</text>` +
        `<rect x="110" y="${y + 6}" width="${w}" height="20" fill="${color}" rx="3"></rect>` +
        `<text x="${118 + w}" y="${y + 21}" class="n">${n}</text></g>`
      );
    })
    .join('');
  return `<svg id="freshness-chart" role="img" aria-label="subscribers by time since their last successful sync" width="560" height="${bars.length * 34}" viewBox="0 0 560 ${bars.length * 34}">${rows}</svg>`;
}

function refreshBlock(r: RefreshRun | null): string {
  if (!r) return '<p>No refresh has run yet.</p>';
  const done = r.succeeded + r.failed + r.notFound + r.invalid;
  const pct =
    r.enqueued > 0
      ? Math.min(100, Math.round((done / r.enqueued) * 100))
      : r.status === 'completed'
        ? 100
        : 0;
  const halted =
    r.status === 'halted'
      ? `<p class="alert">Halted by the mass-removal breaker: ${esc(r.haltedReason)}</p>`
      : '';
  return (
    `<p>Run <b>${r.id}</b> (${esc(r.trigger)}) — <b id="refresh-status">${esc(r.status)}</b>, started ${esc(r.startedAt.toISOString())}` +
    `${r.finishedAt ? `, finished ${esc(r.finishedAt.toISOString())}` : ''}</p>${halted}` +
    `<div class="bar"><div style="width:${pct}%"></div></div>` +
    `<p>${r.subscribersTotal} subscribers fanned out · ${r.enqueued} enqueued · ${r.succeeded} succeeded · ${r.failed} failed · ` +
    `${r.notFound} not found · ${r.invalid} invalid · cards +${r.cardsAdded} / −${r.cardsRemoved}</p>`
  );
}

/** The overview page: what a person on call wants to see at a glance. */
export function renderOverview(view: {
  queue: QueueStatus;
  data: DataStatus;
  freshness: FreshnessBuckets;
  lastRefresh: RefreshRun | null;
}): string {
  const { queue: q, data: d } = view;
  const c = q.counts;
  const failures =
    d.failuresLast24h.length === 0
      ? '<p>No failures in the last 24 hours.</p>'
      : `<table id="failures"><tr><th>error code</th><th>count</th><th>last</th></tr>${d.failuresLast24h
          .map((f) => `<tr><td>${esc(f.errorCode)}</td><td>${f.count}</td><td>${esc(f.lastAt)}</td></tr>`)
          .join('')}</table>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>cards-sync overview</title>
<meta http-equiv="refresh" content="15">
<style>
body{font:15px/1.4 system-ui,sans-serif;margin:2rem;max-width:980px;color:#222}
h1{font-size:1.5rem}h2{font-size:1.1rem;margin-top:1.8rem;border-bottom:1px solid #ddd}
.tiles{display:flex;gap:1rem;flex-wrap:wrap}.tile{border:1px solid #ddd;border-radius:6px;padding:.6rem 1rem;min-width:7rem}
.tile b{display:block;font-size:1.6rem}.alert{color:#b71c1c;font-weight:600}
.bar{background:#eee;height:12px;border-radius:6px;overflow:hidden;width:560px}.bar div{background:#1565c0;height:12px}
svg text{font-size:13px}svg text.n{font-weight:600}table{border-collapse:collapse}td,th{padding:.25rem .8rem;border-bottom:1px solid #eee;text-align:left}
</style></head><body>
<h1>cards-sync</h1>
<p>Queue <b>saved-cards-sync</b> is <b id="queue-state">${q.paused ? 'PAUSED' : 'running'}</b>${
    q.paused
      ? ` <span class="alert">(${esc(q.pausedBy)}: ${esc(q.pausedBecause)}) — <code>cards-sync resume</code></span>`
      : ''
  }. <a href="/admin/queues">Jobs dashboard →</a></p>
<div class="tiles">
<div class="tile">waiting<b id="count-waiting">${(c.waiting ?? 0) + (c.prioritized ?? 0)}</b></div>
<div class="tile">active<b id="count-active">${c.active ?? 0}</b></div>
<div class="tile">delayed<b>${c.delayed ?? 0}</b></div>
<div class="tile">failed<b>${c.failed ?? 0}</b></div>
<div class="tile">oldest waiting<b>${q.oldestWaitingSeconds === null ? '—' : `${q.oldestWaitingSeconds} s`}</b></div>
</div>
<h2>Freshness</h2>
<p>${d.subscribers} subscribers, ${d.activeCards} active cards. Time since each subscriber's last successful sync:</p>
${freshnessChart(view.freshness)}
<h2>Refresh</h2>
${refreshBlock(view.lastRefresh)}
<p>Next nightly run: ${q.nextNightlyRefresh ? esc(q.nextNightlyRefresh) : 'not scheduled yet'}</p>
<h2>Failures in the last 24 hours</h2>
${failures}
</body></html>`;
}
