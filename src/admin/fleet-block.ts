import { type FleetEntry, fleetDisagreements } from '../fleet/index.js';
import { esc, time } from './html.js';

/** The overview's fleet: every live process, its release, and the settings the processes disagree on. */
export function fleetBlock(fleet: readonly FleetEntry[]): string {
  if (fleet.length === 0) return '<p id="fleet">No live process has registered.</p>';
  const rows = fleet
    .map(
      (p) =>
        `<tr><td>${esc(p.role)}</td><td>${esc(p.id)}</td><td>${esc(p.version)}</td><td>${esc(p.knownMigration)}</td>` +
        `<td>${esc(p.keyIds.join(', ') || '—')}</td><td>${p.concurrency ?? '—'}</td><td>${time(p.startedAt)}</td><td>${time(p.lastBeatAt)}</td></tr>`,
    )
    .join('');
  const differ = fleetDisagreements(fleet)
    .map(
      (d) =>
        `<p class="alert fleet-differs">Settings differ: <b>${esc(d.setting)}</b> is ${d.values
          .map((v) => `${esc(v.value)} (${v.processes.length})`)
          .join(' vs ')}. Every process must share it.</p>`,
    )
    .join('');
  return (
    `<table id="fleet"><tr><th>role</th><th>process</th><th>release</th><th>migration</th><th>keys</th>` +
    `<th>concurrency</th><th>started</th><th>last beat</th></tr>${rows}</table>${differ}`
  );
}
