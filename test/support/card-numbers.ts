import { passesLuhn } from '../../src/shared/card-number.js';

// Card numbers for tests of the "never a full card number" rule: Luhn-valid numbers of every
// length from 13 to 19, and the ways a hostile upstream might write one.

/** A seeded PRNG (mulberry32), so a failing variant can be found again. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A Luhn-valid number of `length` digits (13 to 19). */
export function luhnNumber(length: number, random: () => number): string {
  let body = String(3 + Math.floor(random() * 7));
  while (body.length < length - 1) body += String(Math.floor(random() * 10));
  for (let check = 0; ; check++) if (passesLuhn(`${body}${check}`)) return `${body}${check}`;
}

/** The same digits with the last one changed: fails the Luhn check. */
export function notLuhn(number: string): string {
  const last = Number(number.at(-1));
  return number.slice(0, -1) + String((last + 1) % 10);
}

/** Separators a person or a hostile upstream writes between groups of digits. */
const SEPARATORS = [
  ' ',
  '-',
  '.',
  '/',
  '  ',
  ' - ',
  '\u00a0',
  '\u2013',
  '\u2014',
  '_',
  ',',
  '|',
  '\t',
  '·',
  '\u2009',
];

/** `number` written in groups of 4 (or 3–6) joined by one separator, or none. */
export function written(number: string, random: () => number): string {
  const roll = random();
  if (roll < 0.15) return number;
  const size = roll < 0.7 ? 4 : 3 + Math.floor(random() * 4);
  const sep = SEPARATORS[Math.floor(random() * SEPARATORS.length)]!;
  const groups: string[] = [];
  for (let i = 0; i < number.length; i += size) groups.push(number.slice(i, i + size));
  return groups.join(sep);
}

/** The digits in fullwidth or Arabic-Indic form. */
export function otherScript(number: string, zero: number): string {
  return [...number].map((d) => String.fromCodePoint(zero + Number(d))).join('');
}
