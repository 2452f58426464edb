import type { Target } from '../api/index.js';
import { type Line, MAX_LINE_BYTES } from '../shared/index.js';
import { parseTarget, TargetError } from '../sync/parse.js';

// What one line of an `enqueue --file` input says: nothing (blank, comment, header), a target, or
// why it is refused. The strict check and the enqueueing read lines through the same judgeLine.

export type LineVerdict = { skip: 'blank' | 'header' } | { target: Target } | { reason: string };

/** A word naming a column (`subscriber_id`, `email`, `"Customer E-mail"`), as a header holds. */
const COLUMN_NAME = /^"?[A-Za-z][A-Za-z0-9_ .-]{0,63}"?$/;

/**
 * Blank, or a `#` comment. `#` may also begin an e-mail (RFC 5321 allows it in the local part): a
 * line that is one word holding an `@` is an address, not a comment.
 */
function isBlank(text: string): boolean {
  const t = text.trim();
  return t === '' || (t.startsWith('#') && !/^[^\s@]*@\S*$/.test(t));
}

function targetOf(text: string): Target | string {
  try {
    return parseTarget(text);
  } catch (error) {
    if (error instanceof TargetError) return error.message;
    throw error;
  }
}

/**
 * The fields of one CSV line (RFC 4180: comma-separated, a field may be quoted with `""` for a
 * quote inside); undefined when a quoted field does not close on the line.
 */
function csvFields(text: string): string[] | undefined {
  const fields: string[] = [];
  let i = 0;
  for (;;) {
    const start = i;
    while (text[i] === ' ' || text[i] === '\t') i++;
    if (text[i] === '"') {
      let value = '';
      for (i++; ; ) {
        const quote = text.indexOf('"', i);
        if (quote === -1) return undefined;
        value += text.slice(i, quote);
        i = quote + 1;
        if (text[i] !== '"') break;
        value += '"';
        i++;
      }
      while (text[i] === ' ' || text[i] === '\t') i++;
      if (i < text.length && text[i] !== ',') return undefined;
      fields.push(value);
    } else {
      const comma = text.indexOf(',', start);
      i = comma === -1 ? text.length : comma;
      fields.push(text.slice(start, i));
    }
    if (i >= text.length) return fields;
    i++;
  }
}

/** A refused line holding commas: a CSV row (or its header), and which column to pick. */
function csvReason(text: string, number: number): string {
  const fields = csvFields(text) ?? text.split(',');
  const columns = `${fields.length} columns`;
  if (number === 1 && fields.every((f) => COLUMN_NAME.test(f.trim())))
    return `a CSV header (${columns}), not an id or an e-mail: name the column with --column N (or cut -d, -fN); its header is then skipped`;
  for (const [i, field] of fields.entries()) {
    const target = targetOf(field);
    if (typeof target === 'string') continue;
    const what = 'email' in target ? 'an e-mail' : 'a subscriber id';
    return `has commas: a CSV row (${columns}), not one id or e-mail; column ${i + 1} holds ${what}: use --column ${i + 1} (or cut -d, -f${i + 1})`;
  }
  return `has commas: a CSV row (${columns}), not one id or e-mail; name the column with --column N (or cut -d, -fN)`;
}

const ordinal = (n: number) =>
  `${n}${n % 100 >= 11 && n % 100 <= 13 ? 'th' : (['th', 'st', 'nd', 'rd'][n % 10] ?? 'th')}`;

/**
 * Judges one line: `column` (from 1) reads that field of a CSV line, else the whole line is the
 * id or e-mail. Only line 1 may be a header (a column's name); anywhere else such a word is refused.
 */
export function judgeLine(line: Line, column?: number): LineVerdict {
  if ('problem' in line) {
    return {
      reason:
        line.problem === 'too_long'
          ? `line is ${line.bytes} bytes long; an id or e-mail fits in 254`
          : 'not valid UTF-8 text',
    };
  }
  if (isBlank(line.text)) return { skip: 'blank' };
  let text = line.text;
  if (column !== undefined) {
    const fields = csvFields(text);
    if (fields === undefined) return { reason: 'a quoted field ("…) does not close on this line' };
    if (fields.length < column)
      return {
        reason: `has ${fields.length} column${fields.length === 1 ? '' : 's'}, no ${ordinal(column)} (--column ${column})`,
      };
    text = fields[column - 1]!;
    if (text.trim() === '') return { reason: `column ${column} is empty` };
  }
  const target = targetOf(text);
  if (typeof target !== 'string') return { target };
  if (line.number === 1 && COLUMN_NAME.test(text.trim())) return { skip: 'header' };
  if (column === undefined && text.includes(',')) return { reason: csvReason(text, line.number) };
  return { reason: target };
}

/** `--column N`: a field number from 1, as `cut -f` counts; no line holds more than MAX_LINE_BYTES fields. */
export function parseColumn(raw: string): number {
  const n = Number(raw.trim());
  if (!/^\s*\d+\s*$/.test(raw) || n < 1 || n > MAX_LINE_BYTES)
    throw new Error(
      `--column takes the number of the column holding the id or e-mail, counted from 1 as cut -f does (1 to ${MAX_LINE_BYTES})`,
    );
  return n;
}
