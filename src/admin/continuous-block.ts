import { leaseLine } from '../fleet/index.js';
import { formatDuration } from '../shared/index.js';
import type { ContinuousStatus } from '../status/index.js';
import { esc, time } from './html.js';

/** The continuous refresh: the window's budget spent, who is due now, the oldest copy. */
export function continuousBlock(c: ContinuousStatus): string {
  const w = c.window;
  let window =
    '<p id="continuous-window">Continuous refresh: no window yet (a worker opens one within a minute).</p>';
  if (w !== null) {
    const until = w.endsAt ? ` until ${time(w.endsAt)}` : '';
    const state =
      w.status === 'running'
        ? `running since ${time(w.startedAt)}${until}`
        : `<b id="window-status">${esc(w.status)}</b> (started ${time(w.startedAt)}${until})`;
    const halted =
      w.status === 'halted'
        ? `<p class="alert">Halted by the mass-removal breaker: ${esc(w.haltedReason)}</p>`
        : '';
    const share =
      w.budgetRequests !== null && w.budgetRequests > 0
        ? Math.min(100, Math.round((w.spent / w.budgetRequests) * 100))
        : 0;
    const of = w.budgetRequests !== null ? ` of its ${w.budgetRequests}` : '';
    const pace =
      w.status === 'running' && w.allowedByNow !== null
        ? ` (${w.allowedByNow} allowed by now at ${w.budgetPerSec}/s)`
        : w.budgetPerSec !== null
          ? ` (budget ${w.budgetPerSec}/s)`
          : '';
    const e = w.ended;
    window =
      `<p id="continuous-window">Continuous refresh: window <b>${w.refreshRunId}</b> ${state}.</p>${halted}` +
      `<div class="bar"><div style="width:${share}%"></div></div>` +
      `<p id="continuous-budget">Budget: <b id="budget-spent">${w.spent}</b>${of} requests spent${pace} · ` +
      `${e.total} syncs ended: ${e.succeeded} succeeded · ${e.failed} failed · ${e.notFound} not found · ${e.invalid} invalid</p>`;
  }
  const oldest =
    c.oldestCopy === null
      ? 'none yet'
      : `<b id="oldest-copy-age">${formatDuration(c.oldestCopy.ageSeconds)}</b> old (last success ${time(c.oldestCopy.lastSuccessAt)})`;
  const lease =
    c.leaseHolder === null
      ? `<p id="continuous-lease" class="alert">Lease: ${esc(leaseLine(null))}</p>`
      : `<p id="continuous-lease">Lease: ${esc(leaseLine(c.leaseHolder))}</p>`;
  return (
    window +
    lease +
    `<p id="continuous-due">Due now: <b id="due-now">${c.dueNow}</b> subscribers · <b>${c.pastMaxAge}</b> past the max age of ${formatDuration(c.maxAgeSeconds)} · ${c.neverSynced} never synced</p>` +
    `<p id="oldest-copy">Oldest copy: ${oldest}</p>`
  );
}
