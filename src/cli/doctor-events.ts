import { rootCause } from '../../db/errors.js';
import { checkPool } from '../../db/server.js';
import { enabledEndpointCount } from '../../db/webhooks/index.js';
import type { Config } from '../config/index.js';
import { changeEventsInEffect, TURN_EVENTS_ON } from '../events/index.js';

// `cards-sync doctor`'s change-events line: whether the workers write events, and whether anyone
// waits for them. Off is the default and fine for a deployment that only reports; off with
// webhook endpoints registered is a setup that delivers nothing, which doctor says plainly.

export interface EventsCheck {
  verdict: 'ok' | 'WARN';
  name: 'change events';
  says: string;
}

export async function changeEventsCheck(config: Config): Promise<EventsCheck> {
  const pool = checkPool(config.databaseUrl);
  try {
    const events = await changeEventsInEffect(pool, config.changeEvents);
    const endpoints = await enabledEndpointCount(pool);
    const waiting = `${endpoints} enabled webhook endpoint${endpoints === 1 ? '' : 's'}`;
    if (events.state === 'on')
      return { verdict: 'ok', name: 'change events', says: `${events.says}; ${waiting}` };
    if (endpoints === 0 && events.state === 'off') {
      return {
        verdict: 'ok',
        name: 'change events',
        says: `${events.says}: no event is written, none is needed (no webhook endpoint); CHANGE_EVENTS=on feeds /api/changes and webhooks`,
      };
    }
    return {
      verdict: 'WARN',
      name: 'change events',
      says:
        events.state === 'mixed'
          ? `${events.says}: the feed and ${waiting} miss the changes of the workers with it off; ${TURN_EVENTS_ON}`
          : `${events.says}, yet ${waiting} wait for events that are not written; ${TURN_EVENTS_ON}`,
    };
  } catch (error) {
    return {
      verdict: 'WARN',
      name: 'change events',
      says: `cannot read the fleet: ${rootCause(error).message}`,
    };
  } finally {
    await pool.end().catch(() => {});
  }
}
