import type pg from 'pg';
import { liveFleet } from '../fleet/index.js';

// Whether change events are being written is the workers' setting, not the caller's: `webhooks
// add`, `changes` and `doctor` usually run from an operator's shell, whose environment need not
// hold CHANGE_EVENTS at all. They read it from the live workers' published settings
// (fleet_processes.settings, docs/configuration.md), and fall back to their own configuration only
// when no worker is live.

/** What a worker publishes; a worker of a release before CHANGE_EVENTS publishes nothing and always writes events. */
const published = (settings: Record<string, unknown>): 'on' | 'off' =>
  settings.CHANGE_EVENTS === 'off' ? 'off' : 'on';

export interface ChangeEventsInEffect {
  /** `on`: every live worker writes events; `off`: none does; `mixed`: some do (a feed with holes). */
  state: 'on' | 'off' | 'mixed';
  /** Where it was read: the live workers, or this process's own CHANGE_EVENTS when none is live. */
  from: 'workers' | 'own';
  /** For people: `off on the 2 live workers`, `off in this configuration (no worker is live)`. */
  says: string;
}

/** Decides from the live fleet's entries and this process's own setting. */
export function changeEventsOf(
  fleet: readonly { role: string; settings: Record<string, unknown> }[],
  own: 'on' | 'off',
): ChangeEventsInEffect {
  const workers = fleet.filter((p) => p.role !== 'admin');
  if (workers.length === 0) {
    return { state: own, from: 'own', says: `${own} in this configuration (no worker is live)` };
  }
  const on = workers.filter((p) => published(p.settings) === 'on').length;
  const of = `${workers.length} live worker${workers.length === 1 ? '' : 's'}`;
  if (on === 0) return { state: 'off', from: 'workers', says: `off on the ${of}` };
  if (on === workers.length) return { state: 'on', from: 'workers', says: `on on the ${of}` };
  return { state: 'mixed', from: 'workers', says: `on on ${on} of the ${of}, off on the rest` };
}

/** {@link changeEventsOf} for the database's live fleet. */
export async function changeEventsInEffect(pool: pg.Pool, own: 'on' | 'off'): Promise<ChangeEventsInEffect> {
  return changeEventsOf(await liveFleet(pool), own);
}

/** What to do about it, for a line that already said events are not (all) written. */
export const TURN_EVENTS_ON = 'set CHANGE_EVENTS=on on every worker (docs/events.md)';
