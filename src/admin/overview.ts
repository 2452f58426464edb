import type { DataStatus, FreshnessBuckets } from '../../db/admin/index.js';
import type { AdminActionRow } from '../../db/audit/index.js';
import { auditDisagrees, type Freshness, type RefreshRun } from '../../db/refresh/index.js';
import { progressOf, type QueueStatus } from '../../jobs/refresh/index.js';
import { laneWaitsLine } from '../../jobs/sync/index.js';
import { summarizeDetail } from '../audit/index.js';
import type { FleetEntry } from '../fleet/index.js';
import { formatDuration } from '../shared/index.js';
import {
  type ContinuousStatus,
  describeRejection,
  estimateBasis,
  pauseDetailLines,
} from '../status/index.js';
import { continuousBlock } from './continuous-block.js';
import { csrfField } from './csrf.js';
import { fleetBlock } from './fleet-block.js';
import { esc, layout, readOnlyNote, searchForm, time } from './html.js';

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

/** The running refresh's plan: done of planned, its rate, the ETA, and whether it will overrun. */
function planLine(r: RefreshRun): string {
  if (r.status !== 'running' && r.status !== 'halted') return '';
  const p = progressOf(r);
  const parts = [
    p.planned !== null ? `<span id="refresh-done">${p.done}</span> of ${p.planned} done` : `${p.done} done`,
    p.ratePerSec !== null ? `${p.ratePerSec}/s` : 'no rate yet',
    r.rateBudgetPerSec !== null ? `budget ${r.rateBudgetPerSec}/s` : 'no rate limit set',
    p.etaAt ? `ETA <span id="refresh-eta">${time(p.etaAt)}</span>` : 'ETA unknown',
  ];
  const overrun = p.overrun
    ? `<p class="alert" id="refresh-overrun">Will overrun: ${esc(p.overrun)}</p>`
    : '';
  return `<p id="refresh-plan">${parts.join(' · ')}</p>${overrun}`;
}

function refreshBlock(r: RefreshRun | null): string {
  if (!r) return '<p>No refresh has run yet.</p>';
  const done = r.succeeded + r.failed + r.notFound + r.invalid;
  const total = r.plannedSubscribers ?? r.enqueued;
  // An empty run (it matched nobody) is not a finished refresh: no full bar.
  const pct =
    total > 0 ? Math.min(100, Math.round((done / total) * 100)) : r.status === 'completed' ? 100 : 0;
  const halted =
    r.status === 'halted'
      ? `<p class="alert">Halted by the mass-removal breaker: ${esc(r.haltedReason)}</p>`
      : r.status === 'empty'
        ? '<p class="alert">It matched no subscriber: nothing was synced, and it is not a successful refresh.</p>'
        : '';
  return (
    `<p>Run <b>${r.id}</b> (${esc(r.trigger)}) — <b id="refresh-status">${esc(r.status)}</b>, started ${time(r.startedAt)}` +
    `${r.finishedAt ? `, finished ${time(r.finishedAt)}` : ''}</p>${halted}` +
    `<div class="bar"><div style="width:${pct}%"></div></div>${planLine(r)}` +
    `<p>${r.subscribersTotal} subscribers fanned out · ${r.enqueued} enqueued · ${r.succeeded} succeeded · ${r.failed} failed · ` +
    `${r.notFound} not found · ${r.invalid} invalid · cards +${r.cardsAdded} / ↺${r.cardsRestored} / −${r.cardsRemoved}</p>`
  );
}

/** What an operator's last pause or resume did, as carried by the redirect back to the overview. */
export type OverviewFlash =
  | { done: 'paused' }
  | { done: 'already-paused' }
  | { done: 'resumed' | 'not-paused'; continuedRefreshRunId: number | undefined };

/** The flash of the overview's query (`?done=…&run=…`); only known values, so no text comes from the link. */
export function parseFlash(query: Record<string, string>): OverviewFlash | undefined {
  const done = query.done;
  if (done === 'paused' || done === 'already-paused') return { done };
  if (done !== 'resumed' && done !== 'not-paused') return undefined;
  const run = /^\d{1,15}$/.test(query.run ?? '') ? Number(query.run) : undefined;
  return { done, continuedRefreshRunId: run };
}

function flashBlock(f: OverviewFlash | undefined, q: QueueStatus): string {
  if (f === undefined) return '';
  let text: string;
  if (f.done === 'paused') text = 'Paused: workers finish their current jobs and take no new ones.';
  else if (f.done === 'already-paused') {
    // The new reason is shown; the replaced ones stay listed under it and in the audit rows.
    text = q.paused
      ? `The queue was already paused by ${esc(q.pausedBy ?? 'someone')} at ${time(q.pausedAt)}; its reason is now: ${esc(q.pausedBecause ?? '')}. The earlier reason is kept below and in the audit.`
      : 'The queue was already paused, and has been resumed since.';
  } else {
    const run =
      f.continuedRefreshRunId !== undefined
        ? ` Refresh run ${f.continuedRefreshRunId} continues from where the breaker halted it.`
        : ' No halted refresh run to continue.';
    text = `${f.done === 'resumed' ? 'Resumed: workers take jobs again.' : 'The queue was not paused.'}${run}`;
  }
  return `<p id="flash" class="flash" data-done="${esc(f.done)}">${text}</p>`;
}

/** Who paused, the reasons replaced, and the process whose key was rejected. */
function pauseDetails(p: NonNullable<QueueStatus['pause']>): string {
  const lines = pauseDetailLines(p);
  return lines.length === 0
    ? ''
    : `<ul id="pause-details">${lines.map((l) => `<li>${esc(l)}</li>`).join('')}</ul>`;
}

/** API keys rejected in the last 24 h and not accepted since: which process holds each. */
function rejectedKeysBlock(q: QueueStatus): string {
  if (q.rejectedKeys.length === 0) return '';
  const items = q.rejectedKeys.map((r) => `<li>${esc(describeRejection(r))}</li>`).join('');
  return `<div class="alert" id="rejected-keys">API key rejected; fix CARDS_API_KEY of that process and restart it:<ul>${items}</ul></div>`;
}

function controlForms(q: QueueStatus, csrf: string | null): string {
  if (csrf === null) return readOnlyNote('pause or resume processing');
  const resume = `<form id="resume-form" method="post" action="/admin/resume">${csrfField(csrf)}<button type="submit">Resume processing</button> (also continues a refresh run the breaker halted, and the bulk lane)</form>`;
  if (q.paused) return resume;
  return (
    (q.bulkLane.paused ? resume : '') +
    `<form id="pause-form" method="post" action="/admin/pause">${csrfField(csrf)}` +
    '<label>Reason <input type="text" name="reason" required maxlength="500" placeholder="why, for whoever looks next"></label> ' +
    '<button type="submit">Pause processing</button></form>'
  );
}

function actionsBlock(rows: readonly AdminActionRow[]): string {
  if (rows.length === 0) return '<p id="no-actions">No operator action recorded yet.</p>';
  const body = rows
    .map(
      (r) =>
        `<tr data-action="${esc(r.action)}" data-source="${esc(r.source)}"><td>${time(r.at)}</td><td>${esc(r.actor)}</td>` +
        `<td>${esc(r.source)}</td><td>${esc(r.action)}</td><td>${esc(summarizeDetail(r.detail))}</td></tr>`,
    )
    .join('');
  return (
    '<table id="actions"><thead><tr><th>at</th><th>actor</th><th>source</th><th>action</th><th>detail</th></tr></thead>' +
    `<tbody>${body}</tbody></table>`
  );
}

// Reloads every 15 s (to the bare URL, dropping a one-time message) unless someone is typing.
const RELOAD = `<script>
setInterval(function () {
  var fields = document.querySelectorAll('input[type=text],input[type=search]');
  for (var i = 0; i < fields.length; i++) if (fields[i].value !== '' || fields[i] === document.activeElement) return;
  location.replace('/admin');
}, 15000);
</script><noscript><meta http-equiv="refresh" content="15"></noscript>`;

/** What the overview shows; add fields here to add blocks. */
export interface OverviewView {
  queue: QueueStatus;
  data: DataStatus;
  freshness: FreshnessBuckets;
  /** The freshness model's estimate and the audit (docs/refresh.md). */
  model: Freshness;
  /** The live processes (fleet_processes). */
  fleet: readonly FleetEntry[];
  lastRefresh: RefreshRun | null;
  /** REFRESH_MODE=continuous: its window, budget, who is due and the oldest copy; null in nightly mode. */
  continuous: ContinuousStatus | null;
  /** The newest operator actions (admin_actions), newest first. */
  recentActions: readonly AdminActionRow[];
  /** The `_csrf` value for the pause and resume forms; null for the reader, who gets no forms. */
  csrf: string | null;
  /** The outcome of the pause or resume that redirected here, if any. */
  flash?: OverviewFlash | undefined;
}

/** Cards listed by two subscribers at once: nothing when there are none. */
function conflictsBlock(c: { open: number; oldestOpenedAt: string | null }): string {
  if (c.open === 0) return '';
  return (
    `<p class="alert" id="conflicts"><b>${c.open}</b> card${c.open === 1 ? '' : 's'} listed by two subscribers at once ` +
    `(oldest since ${time(c.oldestOpenedAt)}): each stays with its holder and its token is refused ` +
    '(<code>card_conflicts</code>).</p>'
  );
}

const pct = (x: number | null) => (x === null ? '—' : `${(x * 100).toFixed(2)}%`);

/** How stale the copy is: the model's estimate, and the audit that checks it. */
function modelBlock(f: Freshness): string {
  const audit =
    f.audit.samples > 0
      ? `the audit found <b id="audit-stale">${pct(f.audit.staleRatio)}</b> changed (95%: ${pct(f.audit.low)} – ${pct(f.audit.high)}) among ${f.audit.samples} random re-syncs`
      : 'the audit has no sample yet';
  const warnings = [
    auditDisagrees(f)
      ? '<p class="alert" id="model-disagrees">The audit excludes the estimate: the change-rate model is wrong for these wallets.</p>'
      : '',
    f.budgetKeepsMaxAge === false
      ? '<p class="alert" id="max-age-unkept">The refresh budget cannot sync every subscriber once per REFRESH_MAX_AGE.</p>'
      : f.keepsMaxAge === false
        ? `<p class="alert" id="max-age-unkept">${f.pastMaxAge} subscribers are past REFRESH_MAX_AGE.</p>`
        : '',
  ].join('');
  return (
    `<p id="stale-estimate">Estimated stale now: <b>${pct(f.estimatedStaleRatio)}</b> of subscribers (${esc(f.mode ?? 'no refresh plan yet')}); ${audit}. ` +
    `${f.pastMaxAge} past the max age of ${formatDuration(f.maxAgeSeconds)}.</p>` +
    `<p id="estimate-basis">${esc(estimateBasis(f))}.</p>${warnings}`
  );
}

/** The refresh section: the continuous refresh's own figures, or the last run and the next nightly one. */
function refreshSection(view: OverviewView): string {
  const r = view.lastRefresh;
  if (view.continuous === null)
    return `${refreshBlock(r)}\n<p>Next nightly run: ${view.queue.nextNightlyRefresh ? time(view.queue.nextNightlyRefresh) : 'not scheduled yet'}</p>`;
  // A refresh started by hand holds the windows back while it runs: it is shown as itself.
  return `${r && r.trigger !== 'continuous' ? refreshBlock(r) : ''}${continuousBlock(view.continuous)}`;
}

/** The overview page: what a person on call wants to see at a glance. */
export function renderOverview(view: OverviewView): string {
  const { queue: q, data: d } = view;
  const c = q.counts;
  const failures =
    d.failuresLast24h.length === 0
      ? '<p>No failures in the last 24 hours.</p>'
      : `<table id="failures"><tr><th>error code</th><th>count</th><th>last</th></tr>${d.failuresLast24h
          .map((f) => `<tr><td>${esc(f.errorCode)}</td><td>${f.count}</td><td>${time(f.lastAt)}</td></tr>`)
          .join('')}</table>`;
  const body = `
<h1>cards-sync</h1>
<h2>Find a subscriber</h2>
${searchForm()}
<h2>Queue</h2>
<p>Queue <b>saved-cards-sync</b> is <b id="queue-state">${q.paused ? 'PAUSED' : 'running'}</b>${
    q.paused
      ? ` <span class="alert" id="pause-reason">(${esc(q.pausedBy)} at ${time(q.pausedAt)}: ${esc(q.pausedBecause)})</span>`
      : ''
  }. <a href="/admin/queues">Jobs dashboard →</a></p>
${q.paused && q.pause ? pauseDetails(q.pause) : ''}${rejectedKeysBlock(q)}
${
  q.bulkLane.paused
    ? `<p class="alert" id="bulk-lane">Bulk lane PAUSED by the mass-removal breaker at ${time(q.bulkLane.at ?? null)}: ${esc(q.bulkLane.reason ?? '')} ` +
      `(${q.bulkLane.held} bulk jobs held; single re-syncs go on). Resume below.</p>`
    : ''
}
${flashBlock(view.flash, q)}
${controlForms(q, view.csrf)}
<div class="tiles">
<div class="tile">waiting<b id="count-waiting">${(c.waiting ?? 0) + (c.prioritized ?? 0)}</b></div>
<div class="tile">active<b id="count-active">${c.active ?? 0}</b></div>
<div class="tile">delayed<b>${c.delayed ?? 0}</b></div>
<div class="tile" title="jobs that failed for good and are still kept in Redis (a week at most); every failed attempt is in sync_runs, below">failed jobs (kept)<b id="count-failed">${c.failed ?? 0}</b></div>
<div class="tile" title="by lane: ${esc(laneWaitsLine(q.lanes))}">oldest waiting<b id="oldest-waiting">${q.oldestWaitingSeconds === null ? '—' : `${q.oldestWaitingSeconds} s`}</b>${q.oldestWaitingLane ? `<small id="oldest-waiting-lane">${q.oldestWaitingLane} lane</small>` : ''}</div>
</div>
<h2>Freshness</h2>
<p>${d.subscribers} subscribers, ${d.activeCards} active cards. Time since each subscriber's last successful sync:</p>
${conflictsBlock(d.conflicts)}
${freshnessChart(view.freshness)}
${modelBlock(view.model)}
<h2>Refresh</h2>
${refreshSection(view)}
<h2>Fleet</h2>
${fleetBlock(view.fleet)}
<h2>Webhooks</h2>
<p><a id="webhooks-link" href="/admin/webhooks">Webhook endpoints: lag, latest deliveries, dead letters, replay →</a></p>
<h2>Failed attempts in the last 24 hours (sync_runs)</h2>
${failures}
<h2>Recent operator actions (admin_actions)</h2>
${actionsBlock(view.recentActions)}`;
  return layout({ title: 'cards-sync overview', head: RELOAD, body, nav: false });
}
