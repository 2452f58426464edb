import { CHANGE_EVENT_TYPES } from '../../db/schema/parse.js';
import { CursorError, parseCursor } from '../events/parse.js';

// The webhooks' parameters, as the `webhooks` commands and the admin server's webhook routes take
// them: each refused with a line that says what would be right.

const MAX_URL = 2000;
const MAX_DESCRIPTION = 200;

/** An endpoint URL: http(s), no credentials, no fragment. */
export function parseEndpointUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error(`not a URL: give the receiver's full address, like https://hooks.example.com/cards`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new Error(`the URL must be http(s), not ${url.protocol}`);
  if (url.username !== '' || url.password !== '') {
    throw new Error(
      'the URL must not hold a user or password (it is shown in lists); receivers check the signature instead',
    );
  }
  if (url.hash !== '') throw new Error('the URL must not have a #fragment (it is never sent)');
  if (url.href.length > MAX_URL) throw new Error(`the URL is over ${MAX_URL} characters`);
  return url.href;
}

/** `card.added,card.removed`: each one of the event types, no repeats. */
export function parseEventTypes(raw: string): string[] {
  const types = raw.split(',').map((t) => t.trim());
  for (const t of types) {
    if (!(CHANGE_EVENT_TYPES as readonly string[]).includes(t)) {
      throw new Error(
        `--types takes a comma-separated list of ${CHANGE_EVENT_TYPES.join(', ')}; "${t.slice(0, 40)}" is none of them`,
      );
    }
  }
  return [...new Set(types)];
}

/** Free text of at most 200 characters, no control characters (a line break would forge a line). */
export function parseDescription(raw: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
  if (/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/.test(raw))
    throw new Error('--description must be one line without control characters');
  if (raw.length > MAX_DESCRIPTION) throw new Error(`--description is at most ${MAX_DESCRIPTION} characters`);
  return raw;
}

/** An endpoint id (the `id` that `webhooks list` shows). */
export function parseEndpointId(raw: string): number {
  if (!/^\d{1,15}$/.test(raw) || Number(raw) < 1)
    throw new Error(
      `an endpoint id is a whole number from \`cards-sync webhooks list\`, not "${raw.slice(0, 40)}"`,
    );
  return Number(raw);
}

/** A point to replay from: a change-feed cursor, or an ISO 8601 time with its offset. */
export type Since = { cursor: string } | { time: Date };

export function parseSince(raw: string): Since {
  if (/^\d+-\d+$/.test(raw)) {
    try {
      parseCursor(raw);
      return { cursor: raw };
    } catch (error) {
      if (error instanceof CursorError) throw new Error(`--since: ${error.message}`);
      throw error;
    }
  }
  const iso = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2}))?$/;
  const time = Date.parse(raw);
  if (!iso.test(raw) || Number.isNaN(time)) {
    throw new Error(
      `--since takes a change-feed cursor (the "next" of \`cards-sync changes --json\`) or an ISO time like 2026-11-26T10:00:00Z, not "${raw.slice(0, 40)}"`,
    );
  }
  return { time: new Date(time) };
}

/** The URL as lists show it: no query string (it may carry a receiver's token). */
export function shownUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}${u.search === '' ? '' : '?…'}`;
  } catch {
    return '(unreadable URL)';
  }
}
