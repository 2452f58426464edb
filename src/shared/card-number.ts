// Full card numbers in free text (pure). A card number is a run of 13 to 19 digits that passes the
// Luhn check, written with any separators or none: `4111111111111111`, `4111 1111 1111 1111`,
// `4111.1111.1111.1111`, `5500/0055/5555/5559`, `4111–1111–1111–1111`, in the digits of any
// script (fullwidth `４１１１…`). The same rule refuses an
// upstream answer that holds one (src/api/schema.ts), finds one in an error body (src/shared/redact.ts),
// and is kept by the database itself (migration 0013's trigger on saved_cards).

/** At most this many characters between two digits of one number (`" - "`, `". "`). */
const MAX_SEPARATOR = 3;
const MIN_DIGITS = 13;
const MAX_DIGITS = 19;

const DECIMAL = /\p{Nd}/u;
/** Letters, and numbers that are not decimal digits (`½`, `Ⅻ`), end a number. */
const ENDS_RUN = /[\p{L}\p{Nl}\p{No}]/u;

/**
 * The value of a decimal digit of any script (`4`, fullwidth `４`, Arabic-Indic `٤`, Devanagari
 * `४`), or -1. Unicode's decimal digits come in whole runs of ten from zero, so a digit's value
 * is its distance from the start of its run, modulo 10.
 */
function digitValue(char: string): number {
  const code = char.codePointAt(0)!;
  if (code >= 48 && code <= 57) return code - 48;
  if (code < 0x660 || !DECIMAL.test(char)) return -1;
  let start = code;
  while (DECIMAL.test(String.fromCodePoint(start - 1))) start--;
  return (code - start) % 10;
}

/** True when a string of ASCII digits passes the Luhn check. */
export function passesLuhn(digits: string): boolean {
  const d = [...digits].map(Number);
  return luhn(d, 0, d.length);
}

/** True when the digits `d[from..to)` pass the Luhn check. */
function luhn(d: readonly number[], from: number, to: number): boolean {
  let sum = 0;
  let double = false;
  for (let i = to - 1; i >= from; i--) {
    let v = d[i]!;
    if (double) {
      v *= 2;
      if (v > 9) v -= 9;
    }
    sum += v;
    double = !double;
  }
  return sum % 10 === 0;
}

/**
 * Whether some consecutive groups of a run (digits written together), 13 to 19 digits in all, pass
 * the Luhn check: `12 4111 1111 1111 1111` holds one, a token's 29 digits written together do not.
 */
function holdsCardNumber(run: Run): boolean {
  const { digits, groups } = run;
  for (let first = 0; first < groups.length; first++) {
    for (let last = first; last < groups.length; last++) {
      const from = groups[first]!;
      const to = last + 1 < groups.length ? groups[last + 1]! : digits.length;
      if (to - from > MAX_DIGITS) break;
      if (to - from >= MIN_DIGITS && luhn(digits, from, to)) return true;
    }
  }
  return false;
}

/** A run of digits joined by short separators: where it starts and ends in the text, and its digits. */
interface Run {
  start: number;
  end: number;
  digits: number[];
  /** Where each group of digits written together starts, in `digits`. */
  groups: number[];
}

/** The runs of 13 or more digits in a text. */
function longRuns(text: string): Run[] {
  const runs: Run[] = [];
  let run: Run | undefined;
  let gap = 0;
  const close = () => {
    if (run !== undefined && run.digits.length >= MIN_DIGITS) runs.push(run);
    run = undefined;
    gap = 0;
  };
  let i = 0;
  for (const char of text) {
    const at = i;
    i += char.length;
    const value = digitValue(char);
    if (value >= 0) {
      run ??= { start: at, end: i, digits: [], groups: [] };
      if (run.digits.length === 0 || gap > 0) run.groups.push(run.digits.length);
      run.digits.push(value);
      run.end = i;
      gap = 0;
    } else if (run !== undefined) {
      gap++;
      if (gap > MAX_SEPARATOR || ENDS_RUN.test(char)) close();
    }
  }
  close();
  return runs;
}

/** Counts digits (ASCII or not, a little over), to skip the scan for the common short text. */
function digitCount(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if ((code >= 48 && code <= 57) || code >= 0x660) n++;
  }
  return n;
}

/** Whether the text holds a full card number, with any separators or none. */
export function containsCardNumber(text: string): boolean {
  if (digitCount(text) < MIN_DIGITS) return false;
  return longRuns(text).some(holdsCardNumber);
}

/** The text with every run of digits that holds a card number replaced by `replacement`. */
export function maskCardNumbers(text: string, replacement = '[card number]'): string {
  if (digitCount(text) < MIN_DIGITS) return text;
  let out = '';
  let at = 0;
  for (const r of longRuns(text)) {
    if (!holdsCardNumber(r)) continue;
    out += text.slice(at, r.start) + replacement;
    at = r.end;
  }
  return at === 0 ? text : out + text.slice(at);
}
