import type { LeaseHolder } from '../../db/refresh/index.js';
import { formatTime } from '../shared/index.js';
import type { FleetEntry } from './registry.js';
import { showSetting } from './shared-settings.js';

// How `status` tells the fleet: who runs, on which release, and where the processes disagree.

/** A shared setting on which live workers disagree: each value (as people read it) and who holds it. */
export interface Disagreement {
  setting: string;
  values: { value: string; processes: string[] }[];
}

/**
 * Settings whose values differ among live workers. A setting is compared among the workers that
 * publish it: one of an older release that does not know it is no disagreement.
 */
export function fleetDisagreements(fleet: readonly FleetEntry[]): Disagreement[] {
  // The admin server spends no budget and takes no job: its settings are not the fleet's.
  const workers = fleet.filter((p) => p.role !== 'admin');
  const names = new Set(workers.flatMap((p) => Object.keys(p.settings)));
  const out: Disagreement[] = [];
  for (const setting of [...names].sort()) {
    const byValue = new Map<string, string[]>();
    for (const p of workers) {
      if (!(setting in p.settings)) continue;
      const value = showSetting(p.settings[setting]);
      byValue.set(value, [...(byValue.get(value) ?? []), p.id]);
    }
    if (byValue.size > 1) {
      out.push({ setting, values: [...byValue].map(([value, processes]) => ({ value, processes })) });
    }
  }
  return out;
}

/** `REFRESH_MAX_AGE is 1s (1) vs 2m (3)`: the setting, its values and how many workers hold each. */
export function describeDisagreement(d: Disagreement): string {
  return `${d.setting} is ${d.values.map((v) => `${v.value} (${v.processes.length})`).join(' vs ')}`;
}

/** The fleet lines of `status`. */
export function formatFleet(fleet: readonly FleetEntry[], now = Date.now()): string[] {
  if (fleet.length === 0)
    return ['fleet: no live process (workers and admin servers register when they start)'];
  const versions = [...new Set(fleet.map((p) => p.version))];
  const lines = [
    `fleet: ${fleet.length} live process${fleet.length === 1 ? '' : 'es'}` +
      (versions.length > 1 ? `, ${versions.length} releases side by side (${versions.join(', ')})` : ''),
  ];
  for (const p of fleet) {
    const beat = Math.max(0, Math.round((now - Date.parse(p.lastBeatAt)) / 1000));
    lines.push(
      `  ${p.role} ${p.id}: ${p.version}, migration ${p.knownMigration}, keys ${p.keyIds.join(',') || 'none'}` +
        `${p.concurrency !== null ? `, concurrency ${p.concurrency}` : ''}; up since ${formatTime(p.startedAt)}, beat ${beat} s ago`,
    );
  }
  for (const d of fleetDisagreements(fleet)) {
    lines.push(`  SETTINGS DIFFER: ${describeDisagreement(d)}: every process must share it`);
  }
  return lines;
}

/** Live workers whose ring lacks `keyId`: they could not open a token sealed under it. */
export function workersLacking(fleet: readonly FleetEntry[], keyId: string): FleetEntry[] {
  return fleet.filter((p) => p.role !== 'admin' && !p.keyIds.includes(keyId));
}

/** `worker vm:1:ab (keys k1)`, for the lines that name processes. */
export function nameProcesses(processes: readonly FleetEntry[]): string {
  return processes
    .map((p) => `${p.role} ${p.id} (${p.version}, keys ${p.keyIds.join(',') || 'none'})`)
    .join('; ');
}

/** Who holds the lease, or the warning that nobody does: the line an operator looks for first. */
export function leaseLine(h: LeaseHolder | null): string {
  if (h === null) {
    return (
      'NO WORKER HOLDS IT: no window is being served. A worker in REFRESH_MODE=continuous takes it ' +
      "within a second: start one, or read the workers' logs"
    );
  }
  const session = `Postgres session ${h.session}`;
  if (h.since === null) {
    const who = h.pid === null ? 'a session not named as a worker' : `pid ${h.pid}`;
    return `held by ${who} (${session}); who and since when unknown (its record in Redis is missing)`;
  }
  const who = h.fleetId ?? `a worker on ${h.host}, pid ${h.pid}`;
  return `held by ${who} since ${formatTime(h.since)} (${session})`;
}
