// The change feed's cursor as a reader gives it back: its form, checked without the database, so
// that a command's flags (`changes --since`, `webhooks replay --since`) are read without loading it.

/** The cursor before every event: the start of retention. */
export const FEED_START = '0-0';
/** A cursor that is not one of the feed's. */
export class CursorError extends Error {
  override readonly name = 'CursorError';
  readonly code = 'bad_cursor';
}

export interface Cursor {
  txid: string;
  seq: string;
}

/** `<txid>-<seq>`, both decimal: opaque to readers, but readable in a log. */
export function parseCursor(text: string): Cursor {
  const m = /^(\d{1,20})-(\d{1,19})$/.exec(text);
  if (!m || BigInt(m[1]!) > 2n ** 64n - 1n || BigInt(m[2]!) > 2n ** 63n - 1n) {
    throw new CursorError(`not a change feed cursor: use the "next" of an earlier answer, or ${FEED_START}`);
  }
  return { txid: m[1]!, seq: m[2]! };
}
