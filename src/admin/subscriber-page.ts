import type { PageRun, SubscriberPageData } from '../../db/admin/index.js';
import { csrfField } from './csrf.js';
import { fieldChanges } from './field-changes.js';
import { esc, layout, readOnlyNote, time } from './html.js';

/** How long the page keeps reloading while it waits for the run of a re-sync, ms. */
const RESYNC_WAIT_MS = 60_000;

/** Where a re-sync the person asked for stands, from the query of the page it returned to. */
export interface ResyncState {
  /** The highest run id of the subscriber (or of the table, for an e-mail) when the button was pressed. */
  since: number;
  /** When it was pressed (epoch ms), or undefined when the link does not say. */
  requestedAt: number | undefined;
  /** The job was already on the queue; the press added none. */
  alreadyQueued: boolean;
  /** The newest run after `since`, once there is one. */
  run: PageRun | undefined;
  /** The cards that run changed, and how. */
  changed: Map<number, string>;
  /** The queue is paused, so nothing will run until someone resumes it. */
  paused: boolean;
  now: number;
}

// Failures the queue retries (sync-subscriber.ts marks them retryable): the page waits past them.
const RETRIED_CODES = new Set(['http_5xx', 'timeout', 'connection', 'aborted', 'db_unavailable', 'db_error']);
const retried = (run: PageRun) =>
  run.status === 'rate_limited' || (run.status === 'failed' && RETRIED_CODES.has(run.errorCode ?? ''));

/**
 * True while the page should reload itself to catch the run of a re-sync: no run yet, or only an
 * attempt the queue retries, and the request is less than {@link RESYNC_WAIT_MS} old.
 */
function waitingForRun(r: ResyncState | undefined): boolean {
  if (r === undefined || r.requestedAt === undefined || r.now - r.requestedAt >= RESYNC_WAIT_MS) return false;
  return r.run === undefined || retried(r.run);
}

const counts = (run: PageRun) =>
  `+${run.inserted} ~${run.updated} −${run.removed}${run.restored > 0 ? ` ↺${run.restored}` : ''}`;

function resyncBlock(r: ResyncState | undefined): string {
  if (r === undefined) return '';
  const already = r.alreadyQueued
    ? ' A sync of this subscriber was already queued; the press added none.'
    : '';
  const paused = r.paused
    ? ' <span class="alert">The queue is PAUSED: nothing runs until someone resumes it on the <a href="/admin">overview</a>.</span>'
    : '';
  if (waitingForRun(r)) {
    const attempt = r.run
      ? ` Run ${r.run.id} ended ${esc(r.run.status)} (${esc(r.run.errorCode ?? '')}); the worker retries it.`
      : '';
    return `<p id="resync-state" class="flash" data-waiting="true">Re-sync requested — waiting for the worker…${attempt}${already}${paused}</p>`;
  }
  if (r.run !== undefined) {
    const ok = r.run.status === 'succeeded' || r.run.status === 'superseded';
    const error = r.run.errorMessage ? `: ${esc(r.run.errorMessage)}` : '';
    const retry = retried(r.run) ? ' The worker may still retry it; each attempt is a row below.' : '';
    return (
      `<p id="resync-state" class="flash ${ok ? 'done' : 'warn'}" data-run-id="${r.run.id}" data-status="${esc(r.run.status)}">` +
      `Re-sync finished: run ${r.run.id}, ${esc(r.run.status)}, ${counts(r.run)}${error}.${retry}</p>`
    );
  }
  return (
    `<p id="resync-state" class="flash warn" data-waiting="false">No new run within ${RESYNC_WAIT_MS / 1000} s of the re-sync request.${already}${paused} ` +
    'The job may be waiting behind others, delayed for a retry, or failed: see the <a href="/admin/queues">jobs dashboard</a>. ' +
    'Reload this page to look again.</p>'
  );
}

function resyncForm(action: string, label: string, csrf: string | null, hidden = ''): string {
  if (csrf === null) return readOnlyNote('re-sync');
  return `<form method="post" action="${esc(action)}" class="inline">${csrfField(csrf)}${hidden}<button type="submit" id="resync">${esc(label)}</button></form>`;
}

function subscriberBlock(d: SubscriberPageData): string {
  const s = d.subscriber;
  if (s === null) return '';
  const row = (label: string, value: string, id: string) => `<dt>${label}</dt><dd id="${id}">${value}</dd>`;
  return (
    '<dl id="subscriber">' +
    row('e-mail', s.email ? esc(s.email) : '—', 'sub-email') +
    row('last synced', time(s.lastSyncedAt), 'sub-last-synced') +
    row('last success', time(s.lastSuccessAt), 'sub-last-success') +
    row('last status', esc(s.lastStatus ?? '—'), 'sub-last-status') +
    row('last error', esc(s.lastError ?? '—'), 'sub-last-error') +
    row('consecutive failures', String(s.consecutiveFailures), 'sub-failures') +
    row('active cards', String(s.activeCards), 'sub-active-cards') +
    '</dl>'
  );
}

function cardsTable(d: SubscriberPageData, changed: Map<number, string>): string {
  if (d.cards.length === 0) return '<p id="no-cards">No cards stored.</p>';
  const rows = d.cards
    .map((c) => {
      const change = changed.get(c.id);
      const cls = [c.removedAt ? 'removed' : '', change ? 'changed' : ''].filter(Boolean).join(' ');
      return (
        `<tr data-card-id="${c.id}"${cls ? ` class="${cls}"` : ''}${change ? ` data-change="${esc(change)}"` : ''}>` +
        `<td>${c.id}</td><td class="nowrap">${esc(c.binNumber)}</td><td>${esc(c.cardBankName)} (${c.cardBankCode})</td>` +
        `<td>${esc(c.cardFamily || '—')}</td><td>${c.companyId}</td><td>${time(c.createDate)}</td>` +
        `<td>${time(c.firstSeenAt)}</td><td>${time(c.lastSeenAt)}</td><td>${time(c.removedAt)}</td>` +
        `<td>${change ? `<b>${esc(change)}</b>` : ''}</td></tr>`
      );
    })
    .join('');
  const more = d.moreCards ? `<p>Only the first ${d.cards.length} cards are listed.</p>` : '';
  return (
    '<div class="wide"><table id="cards"><thead><tr><th>card id</th><th>bin number</th><th>bank (code)</th><th>family</th>' +
    '<th>company</th><th>created</th><th>first seen</th><th>last seen</th><th>removed</th><th>this re-sync</th></tr></thead>' +
    `<tbody>${rows}</tbody></table></div>${more}`
  );
}

/** A refresh run's syncs carry the run's trigger (`manual` when started by hand): say whose they are. */
function triggerText(r: PageRun): string {
  return r.refreshRunId === null ? r.trigger : `${r.trigger} · refresh run #${r.refreshRunId}`;
}

function runsTable(d: SubscriberPageData, since: number | undefined): string {
  if (d.runs.length === 0) return '<p id="no-runs">No sync runs recorded.</p>';
  const rows = d.runs
    .map((r) => {
      const isNew = since !== undefined && r.id > since;
      return (
        `<tr data-run-id="${r.id}" data-status="${esc(r.status)}"${isNew ? ' class="new"' : ''}>` +
        `<td>${r.id}</td><td>${esc(triggerText(r))}</td><td>${esc(r.status)}</td><td>${time(r.startedAt)}</td>` +
        `<td>${time(r.finishedAt)}</td><td>${r.cardsSeen}</td><td>${r.inserted}</td><td>${r.updated}</td>` +
        `<td>${r.unchanged}</td><td>${r.removed}</td><td>${r.restored}</td><td>${esc(r.errorCode ?? '')}</td>` +
        `<td>${esc(r.errorMessage ?? '')}</td></tr>`
      );
    })
    .join('');
  return (
    '<div class="wide"><table id="runs"><thead><tr><th>run</th><th>trigger</th><th>status</th><th>started</th><th>finished</th>' +
    '<th>seen</th><th>inserted</th><th>updated</th><th>unchanged</th><th>removed</th><th>restored</th>' +
    `<th>error code</th><th>error</th></tr></thead><tbody>${rows}</tbody></table></div>`
  );
}

function historyTable(d: SubscriberPageData): string {
  if (d.changes.length === 0) return '<p id="no-history">No card changes recorded.</p>';
  const fields = fieldChanges(d.changes, d.cards);
  const rows = d.changes
    .map(
      (h) =>
        `<tr data-card-id="${h.cardId}" data-change="${esc(h.change)}"><td>${time(h.changedAt)}</td><td>${h.cardId}</td>` +
        `<td>${esc(h.change)}${h.reason ? ` (${esc(h.reason)})` : ''}</td><td>${(fields.get(h.id) ?? []).map(esc).join('<br>')}</td><td>${h.syncRunId ?? '—'}</td></tr>`,
    )
    .join('');
  return (
    '<table id="history"><thead><tr><th>changed</th><th>card id</th><th>change</th><th>fields</th><th>run</th></tr></thead>' +
    `<tbody>${rows}</tbody></table>`
  );
}

/** Whether anything is stored of the subscriber (else the page is a 404 that still offers a re-sync). */
export function isKnown(d: SubscriberPageData): boolean {
  return d.subscriber !== null || d.runs.length > 0 || d.cards.length > 0;
}

/** The subscriber page: stored row, cards (never a token), runs and history, and "Re-sync now". */
export function renderSubscriberPage(view: {
  subscriberId: number;
  data: SubscriberPageData;
  /** The `_csrf` value of the re-sync form; null for the reader, who gets a note instead. */
  csrf: string | null;
  resync?: ResyncState;
}): string {
  const { subscriberId: id, data: d, resync } = view;
  const intro = isKnown(d)
    ? ''
    : `<p id="unknown" class="alert">Subscriber ${id} is not known yet: no sync has stored it. It may still exist upstream; a re-sync asks the API.</p>`;
  const body =
    `<h1>Subscriber <span id="subscriber-id">${id}</span></h1>${intro}` +
    `<div class="actions">${resyncForm(`/admin/subscribers/${id}/resync`, 'Re-sync now', view.csrf)}` +
    `${view.csrf === null ? '' : ' asks a worker to sync this subscriber now, through the queue.'}</div>` +
    resyncBlock(resync) +
    subscriberBlock(d) +
    `<h2>Cards</h2>${cardsTable(d, resync?.changed ?? new Map())}` +
    `<h2>Sync runs, newest first</h2>${runsTable(d, resync?.since)}` +
    `<h2>Card history</h2>${historyTable(d)}`;
  return layout({
    title: `subscriber ${id} — cards-sync`,
    body,
    ...(waitingForRun(resync) ? { refreshSeconds: 1 } : {}),
  });
}

/** An e-mail no subscriber is stored with yet, and "Re-sync this e-mail". */
export function renderUnknownEmail(view: {
  email: string;
  csrf: string | null;
  resync?: ResyncState;
}): string {
  const body =
    `<h1>No subscriber with this e-mail yet</h1><p id="unknown" class="alert">The e-mail <b id="email">${esc(view.email)}</b> ` +
    'is not known yet: no sync has learned it. The subscriber may exist upstream; a re-sync asks the API by e-mail.</p>' +
    `<div class="actions">${resyncForm('/admin/resync-email', 'Re-sync this e-mail', view.csrf, `<input type="hidden" name="email" value="${esc(view.email)}">`)}</div>` +
    resyncBlock(view.resync);
  return layout({
    title: 'unknown e-mail — cards-sync',
    body,
    ...(waitingForRun(view.resync) ? { refreshSeconds: 1 } : {}),
  });
}
