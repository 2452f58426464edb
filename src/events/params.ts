import { FEED_START, parseCursor } from './cursor.js';
import { MAX_LIMIT } from './feed.js';
import { MAX_WAIT_SECONDS } from './long-poll.js';

// The feed's parameters, as `GET /api/changes` and `cards-sync changes` take them: refused with a
// message that says what is expected, never clamped in silence.

/** Events per page when no limit is asked for. */
const DEFAULT_LIMIT = 100;

export class FeedParamError extends Error {
  override readonly name = 'FeedParamError';
}

export interface FeedParams {
  after: string;
  limit: number;
  waitMs: number;
}

function whole(name: string, raw: string | undefined, min: number, max: number, fallback: number): number {
  if (raw === undefined) return fallback;
  if (!/^\d{1,9}$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    throw new FeedParamError(`${name} must be a whole number from ${min} to ${max}`);
  }
  return Number(raw);
}

export function parseFeedParams(q: { after?: string; limit?: string; wait?: string }): FeedParams {
  const after = q.after === undefined || q.after === '' ? FEED_START : q.after;
  try {
    parseCursor(after);
  } catch (error) {
    throw new FeedParamError(`after: ${(error as Error).message}`);
  }
  return {
    after,
    limit: whole('limit', q.limit, 1, MAX_LIMIT, DEFAULT_LIMIT),
    waitMs: whole('wait', q.wait, 0, MAX_WAIT_SECONDS, 0) * 1000,
  };
}
