import type { Readable } from 'node:stream';

/** The longest line kept, in bytes; longer lines are reported, never buffered. */
export const MAX_LINE_BYTES = 4096;

export type Line =
  | { number: number; text: string; bytes: number }
  | { number: number; problem: 'too_long' | 'invalid_utf8'; bytes: number };

const NEWLINE = 0x0a;
const decoder = new TextDecoder('utf-8', { fatal: true });

/**
 * Streams a file of lines without holding more than one line in memory: handles LF and CRLF,
 * a UTF-8 BOM, a last line without newline; a line over {@link MAX_LINE_BYTES} or not valid UTF-8
 * is reported as such (its bytes are skipped, not kept).
 */
export async function* readLines(input: Readable): AsyncGenerator<Line> {
  let number = 0;
  let parts: Buffer[] = [];
  let size = 0;
  let tooLong = false;
  const finish = (): Line => {
    number++;
    const bytes = size;
    if (tooLong) {
      parts = [];
      size = 0;
      tooLong = false;
      return { number, problem: 'too_long', bytes };
    }
    let buf = parts.length === 1 ? parts[0]! : Buffer.concat(parts, size);
    parts = [];
    size = 0;
    if (number === 1 && buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf) buf = buf.subarray(3);
    if (buf.length > 0 && buf[buf.length - 1] === 0x0d) buf = buf.subarray(0, buf.length - 1);
    try {
      return { number, text: decoder.decode(buf), bytes };
    } catch {
      return { number, problem: 'invalid_utf8', bytes };
    }
  };
  const add = (piece: Buffer) => {
    size += piece.length;
    if (tooLong) return;
    if (size > MAX_LINE_BYTES) {
      tooLong = true;
      parts = [];
      return;
    }
    parts.push(piece);
  };
  for await (const chunk of input) {
    const buf = typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer);
    let start = 0;
    for (let i = buf.indexOf(NEWLINE, start); i !== -1; i = buf.indexOf(NEWLINE, start)) {
      add(buf.subarray(start, i));
      yield finish();
      start = i + 1;
    }
    if (start < buf.length) add(buf.subarray(start));
  }
  if (size > 0 || tooLong) yield finish();
}
