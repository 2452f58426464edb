import type { EndpointRow } from '../../db/webhooks/index.js';
import {
  type DeliveryReport,
  nearRetention,
  nearRetentionText,
  pendingText,
  urlWithoutQuery,
  waitingText,
} from '../webhooks/index.js';
import { csrfField } from './csrf.js';
import { esc, layout, readOnlyNote, time } from './html.js';

// The ops page's webhooks view (`GET /admin/webhooks`): each endpoint with its state, lag and dead
// letters, its latest deliveries and dead letters, a replay form and a remove button. Never a secret: the rows
// read here hold none (the sealed secret is not selected), the URL loses its query string, and
// every text (description, reason, excerpt) is escaped.

/** Characters of an answer's excerpt the page shows (the table keeps up to 1,024). */
const SHOWN_EXCERPT = 200;

/**
 * How far before the oldest dead letter's event time a replay starts by default. The feed is in
 * commit order (txid, seq), and an event's time is taken before its transaction commits: a sync
 * that took its time just before the dead letter's may commit just after it, and a point between
 * the two would skip the dead letter. A minute covers any sync; the few events sent again are
 * deduplicated by their `webhook-id`.
 */
const REPLAY_MARGIN_MS = 60_000;

export interface EndpointView {
  endpoint: EndpointRow;
  /** Newest first. */
  latest: DeliveryReport[];
  /** Newest first. */
  dead: DeliveryReport[];
  /** When its oldest dead letter's event was written; null with none. */
  oldestDeadAt: Date | null;
}

/**
 * What the link after a form says: `?done=replayed&endpoint=…&replayed=…`, or
 * `?done=removed&endpoint=…&pending=…&capped=0|1&lag=…`, or `?done=retried&endpoint=…&retried=…`. Numbers only, so no text comes from the link.
 */
export type WebhooksFlash =
  | { done: 'replayed'; endpoint: number; replayed: number }
  | { done: 'retried'; endpoint: number; retried: number }
  | { done: 'removed'; endpoint: number; pending: number; pendingCapped: boolean; lagSeconds: number };

export function parseWebhooksFlash(query: Record<string, string>): WebhooksFlash | undefined {
  const n = (v: string | undefined) => (v !== undefined && /^\d{1,9}$/.test(v) ? Number(v) : undefined);
  const endpoint = n(query.endpoint);
  if (endpoint === undefined) return undefined;
  if (query.done === 'replayed') {
    const replayed = n(query.replayed);
    return replayed === undefined ? undefined : { done: 'replayed', endpoint, replayed };
  }
  if (query.done === 'retried') {
    const retried = n(query.retried);
    return retried === undefined ? undefined : { done: 'retried', endpoint, retried };
  }
  if (query.done === 'removed') {
    const pending = n(query.pending);
    const lagSeconds = n(query.lag);
    if (pending === undefined || lagSeconds === undefined) return undefined;
    return { done: 'removed', endpoint, pending, pendingCapped: query.capped === '1', lagSeconds };
  }
  return undefined;
}

/** The `since` a replay of an endpoint's dead letters starts from, as the form shows it. */
function replaySince(oldestDeadAt: Date): string {
  return new Date(oldestDeadAt.getTime() - REPLAY_MARGIN_MS).toISOString();
}

function state(e: EndpointRow): string {
  if (!e.enabled) return `<span class="alert">disabled</span>: ${esc(e.disabledReason ?? 'no reason given')}`;
  if (e.failingSince !== null) return `<span class="alert">FAILING</span> since ${time(e.failingSince)}`;
  return 'enabled, ok';
}

function answer(d: DeliveryReport): { status: string; latency: string; at: string; excerpt: string } {
  const last = d.last;
  if (last === null) return { status: 'not tried yet', latency: '', at: '', excerpt: '' };
  const excerpt =
    last.excerpt.length > SHOWN_EXCERPT ? `${last.excerpt.slice(0, SHOWN_EXCERPT)}…` : last.excerpt;
  return {
    status: esc(last.statusCode ?? last.errorCode ?? ''),
    latency: `${last.latencyMs} ms`,
    at: time(last.at),
    excerpt: `<code>${esc(excerpt)}</code>`,
  };
}

function deliveriesTable(rows: DeliveryReport[], id: string, none: string): string {
  if (rows.length === 0) return `<p id="${id}">${esc(none)}</p>`;
  const head =
    '<tr><th>delivery</th><th>event</th><th>type</th><th>subscriber</th><th>status</th><th>attempts</th><th>last HTTP status</th><th>latency</th><th>last attempt</th><th>answer (redacted)</th></tr>';
  const body = rows
    .map((d) => {
      const a = answer(d);
      const status = `${esc(d.status)}${d.replay ? ' (replay)' : ''}`;
      return `<tr data-delivery="${d.id}" data-status="${esc(d.status)}"><td>${d.id}</td><td class="nowrap">${esc(d.eventId)}</td><td>${esc(d.type)}</td><td>${d.subscriberId}</td><td>${status}</td><td>${d.attempts}</td><td>${a.status}</td><td class="nowrap">${a.latency}</td><td>${a.at}</td><td>${a.excerpt}</td></tr>`;
    })
    .join('');
  return `<div class="wide"><table id="${id}">${head}${body}</table></div>`;
}

function replayForm(v: EndpointView, csrf: string | null): string {
  const id = v.endpoint.id;
  if (csrf === null) return readOnlyNote('replay');
  const since = v.oldestDeadAt === null ? '' : replaySince(v.oldestDeadAt);
  const hint =
    v.oldestDeadAt === null
      ? 'No dead letters. To send events again, give an ISO time (2026-11-26T10:00:00Z) or a change-feed cursor.'
      : `Sends again every event from just before its oldest dead letter (${esc(since)}), each with the event's own id as its webhook-id, the same as before: a receiver that deduplicates on it drops the ones it already has.`;
  return (
    `<form class="replay-form" id="replay-${id}" method="post" action="/admin/webhooks/${id}/replay">${csrfField(csrf)}` +
    `<label>Replay from <input type="text" name="since" value="${esc(since)}" placeholder="ISO time or feed cursor" required></label> ` +
    `<button type="submit">Replay</button></form><p>${hint}</p>`
  );
}

/** The retry button: what waits out its backoff goes out at the next claim (an enabled endpoint's only). */
function retryForm(e: EndpointRow, csrf: string | null): string {
  if (csrf === null || !e.enabled) return '';
  return (
    `<form class="retry-form" id="retry-${e.id}" method="post" action="/admin/webhooks/${e.id}/retry">${csrfField(csrf)}` +
    '<button type="submit">Retry now</button> <span>sends now what waits out its backoff (a receiver back up)</span></form>'
  );
}

/**
 * The remove button. Its confirmation needs no script (the pages run none): a checkbox the browser
 * requires, saying what will not be sent, and the route refuses a post without it.
 */
function removeForm(e: EndpointRow, csrf: string | null): string {
  if (csrf === null) return '';
  const waiting = waitingText(e);
  return (
    `<form class="remove-form" id="remove-${e.id}" method="post" action="/admin/webhooks/${e.id}/remove">${csrfField(csrf)}` +
    `<label><input type="checkbox" name="confirm" value="yes" required> Remove endpoint ${e.id}: ${esc(waiting)} waiting for it will not be sent</label> ` +
    '<button type="submit">Remove endpoint</button></form>'
  );
}

function endpointSection(v: EndpointView, csrf: string | null, retentionDays: number): string {
  const e = v.endpoint;
  const near = nearRetention(e.lagSeconds, retentionDays)
    ? `<p class="alert near-retention" id="near-retention-${e.id}">${esc(nearRetentionText(e, retentionDays))}</p>\n`
    : '';
  return `<section class="endpoint" id="endpoint-${e.id}" data-endpoint="${e.id}">
<h2>Endpoint ${e.id}</h2>
${near}<dl>
<dt>URL</dt><dd class="url">${esc(urlWithoutQuery(e.url))}</dd>
<dt>description</dt><dd class="description">${esc(e.description)}</dd>
<dt>event types</dt><dd>${esc(e.eventTypes?.join(', ') ?? 'all')}</dd>
<dt>state</dt><dd class="state">${state(e)}</dd>
<dt>pending</dt><dd class="pending" title="events not delivered yet, enabled or not (counted up to 10,000 of each kind)">${pendingText(e)}</dd>
<dt>lag</dt><dd class="lag" title="age of its oldest undelivered event, enabled or not">${e.lagSeconds} s</dd>
<dt>dead letters</dt><dd class="dead-letters">${e.deadLetters}</dd>
</dl>
${replayForm(v, csrf)}
${retryForm(e, csrf)}
${removeForm(e, csrf)}
<h3>Latest deliveries</h3>
${deliveriesTable(v.latest, `latest-${e.id}`, 'No deliveries yet.')}
<h3>Dead letters</h3>
${deliveriesTable(v.dead, `dead-${e.id}`, 'No dead letters.')}
</section>`;
}

function flashBlock(f: WebhooksFlash | undefined): string {
  if (f === undefined) return '';
  if (f.done === 'removed') {
    return `<p id="flash" class="flash done" data-done="removed">Endpoint ${f.endpoint} removed: ${esc(waitingText(f))} still waited for it and will not be sent. Its past deliveries stay readable (<code>cards-sync webhooks deliveries ${f.endpoint}</code>) until the retention drops them.</p>`;
  }
  if (f.done === 'retried') {
    return `<p id="flash" class="flash done" data-done="retried">Endpoint ${f.endpoint}: ${f.retried} deliver${f.retried === 1 ? 'y' : 'ies'} waiting out a backoff due now.</p>`;
  }
  return `<p id="flash" class="flash done" data-done="replayed">Endpoint ${f.endpoint}: ${f.replayed} event${f.replayed === 1 ? '' : 's'} queued again (replay).</p>`;
}

export interface WebhooksPageView {
  /** Null before migration 0027 (no webhook tables). */
  endpoints: EndpointView[] | null;
  /** The forms' `_csrf`; null for the reader, whose page has no forms. */
  csrf: string | null;
  flash?: WebhooksFlash | undefined;
  /** `CHANGE_EVENTS_RETENTION_DAYS`: an endpoint whose oldest waiting event nears it is flagged. */
  retentionDays: number;
}

export function renderWebhooksPage(view: WebhooksPageView): string {
  const list =
    view.endpoints === null
      ? '<p class="alert">No webhook tables in this database: run `cards-sync migrate`.</p>'
      : view.endpoints.length === 0
        ? '<p id="no-endpoints">No webhook endpoints; add one with <code>cards-sync webhooks add URL</code>.</p>'
        : view.endpoints.map((v) => endpointSection(v, view.csrf, view.retentionDays)).join('\n');
  const body = `<h1>Webhooks</h1>
<p>Each endpoint, its latest deliveries and its dead letters (docs/webhooks.md). Secrets are never shown.</p>
${flashBlock(view.flash)}
${list}`;
  return layout({ title: 'Webhooks — cards-sync', body });
}
