import { createDb } from '../../db/client.js';
import type { Config } from '../config/index.js';
import {
  type ChangeEvent,
  CursorAheadError,
  changeEventsInEffect,
  checkCursor,
  createChangeSignal,
  FEED_START,
  MAX_LIMIT,
  pollFeed,
  readFeed,
  TURN_EVENTS_ON,
} from '../events/index.js';
import type { Io } from './common.js';
import { describeDbError } from './db-problem.js';

/** How long one wait of `--follow` lasts before it asks again, ms. */
const FOLLOW_WAIT_MS = 30_000;

/** One line per event for a person: when, what, whose card, what changed. */
function formatEvent(e: ChangeEvent): string {
  const d = e.data;
  const changes = d.changes as Record<string, { old: unknown; new: unknown } | string> | null;
  const what = changes
    ? ` ${Object.entries(changes)
        .map(([field, c]) =>
          typeof c === 'string'
            ? `${field} ${c}`
            : `${field} ${JSON.stringify(c.old)} → ${JSON.stringify(c.new)}`,
        )
        .join(', ')}`
    : '';
  const reason = d.reason ? ` (${String(d.reason)})` : '';
  return `${e.timestamp} ${e.type} subscriber ${String(d.subscriberId)} card ${String(d.cardId)} ${String(d.binNumber)}${what}${reason} ${e.id}`;
}

/**
 * `cards-sync changes [--after CURSOR] [--follow] [--json]`: prints the feed's events in order;
 * the cursor to go on from is printed on stderr at the end (`next: …`). `--follow` waits for new
 * events until SIGINT or SIGTERM. A cursor beyond the feed's head is refused (exit 2), naming the head.
 */
export async function cmdChanges(
  config: Config,
  io: Io,
  o: { after: string | undefined; follow: boolean; json: boolean },
): Promise<number> {
  const handle = createDb(config.databaseUrl, { max: 2, timeoutMs: config.databaseTimeoutMs });
  const signal = createChangeSignal(handle.pool);
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  let after = o.after ?? FEED_START;
  let printed = 0;
  try {
    await checkCursor(handle.pool, after);
    // An empty feed is not always a quiet one: say so when the workers write no events.
    const events = await changeEventsInEffect(handle.pool, config.changeEvents);
    const why = `change events are ${events.says}: syncs write no events; ${TURN_EVENTS_ON}`;
    if (o.follow && events.state !== 'on') io.err(`changes: ${why}`);
    for (;;) {
      const page = o.follow
        ? await pollFeed(handle.pool, signal, {
            after,
            limit: MAX_LIMIT,
            waitMs: FOLLOW_WAIT_MS,
            abort: stop.signal,
          })
        : await readFeed(handle.pool, { after, limit: MAX_LIMIT });
      for (const e of page.events) io.out(o.json ? JSON.stringify(e) : formatEvent(e));
      printed += page.events.length;
      after = page.next;
      if (stop.signal.aborted || (!o.follow && page.events.length < MAX_LIMIT)) break;
    }
    if (!o.follow && events.state !== 'on' && (printed === 0 || events.state === 'mixed')) {
      io.err(`changes: ${printed === 0 ? 'no events; ' : ''}${why}`);
    }
    io.err(`next: ${after}`);
    return 0;
  } catch (error) {
    if (error instanceof CursorAheadError) {
      io.err(`cards-sync: ${error.message}`);
      return 2;
    }
    io.err(`cards-sync: ${describeDbError(error, config.databaseUrl) ?? (error as Error).message}`);
    return 1;
  } finally {
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
    await signal.close();
    await handle.close();
  }
}
