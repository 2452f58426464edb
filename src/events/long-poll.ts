import type pg from 'pg';
import type { ChangeSignal } from '../../db/events/index.js';
import { type FeedPage, feedHeldBack, readFeed } from './feed.js';

/** Longest wait a long poll may ask for, seconds. */
export const MAX_WAIT_SECONDS = 60;
/** How soon a poll looks again while a running transaction holds events back, ms. */
const HELD_BACK_RECHECK_MS = 100;

/**
 * Reads a page; while it is empty, waits up to `waitMs` for an event: woken by the outbox's
 * notification at the writer's commit, so it answers within a round trip of a new event.
 */
export async function pollFeed(
  pool: pg.Pool,
  signal: ChangeSignal,
  o: { after?: string | null; limit: number; waitMs: number; abort?: AbortSignal },
): Promise<FeedPage> {
  const deadline = Date.now() + o.waitMs;
  for (;;) {
    const left = deadline - Date.now();
    const wait = left > 0 && !o.abort?.aborted ? await signal.arm(left, o.abort) : undefined;
    const page = await readFeed(pool, o).catch((error: unknown) => {
      wait?.cancel();
      throw error;
    });
    if (page.events.length > 0 || wait === undefined) {
      wait?.cancel();
      return page;
    }
    if (await feedHeldBack(pool, o.after)) {
      wait.cancel();
      await new Promise((r) => setTimeout(r, Math.min(HELD_BACK_RECHECK_MS, Math.max(0, left))));
      continue;
    }
    const woken = await wait.woken;
    if (!woken && Date.now() >= deadline) return page;
  }
}
