import { z } from 'zod';
import type { SavedCard } from '../../db/sync/index.js';
import { containsCardNumber } from '../shared/index.js';

export type { SavedCard };

/** `dddd-xxxx-xxxx-dddd`: first four and last four digits, two masked groups. */
const MASKED_BIN = /^\d{4}-[xX*]{4}-[xX*]{4}-\d{4}$/;
const CREATE_DATE = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.\d{1,9})?([+-])(\d{2}):(\d{2})$/;

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/** True when the string is a real date-time of the `YYYY-MM-DDThh:mm:ss+hh:mm` shape. */
function isCreateDate(value: string): boolean {
  const m = CREATE_DATE.exec(value);
  if (!m) return false;
  const month = Number(m[2]);
  const day = Number(m[3]);
  if (month < 1 || month > 12 || Number(m[4]) > 23 || Number(m[5]) > 59 || Number(m[6]) > 59) return false;
  if (Number(m[8]) > 14 || Number(m[9]) > 59) return false;
  // February asks the calendar (as Date.UTC reads the year); every other month has its fixed length.
  const days = month === 2 ? new Date(Date.UTC(Number(m[1]), 2, 0)).getUTCDate() : DAYS_IN_MONTH[month - 1]!;
  return day >= 1 && day <= days;
}

/** True when a string holds 12 or more digits: it could be (part of) a full card number. */
function couldBeCardNumber(value: string): boolean {
  return (value.match(/\d/g)?.length ?? 0) >= 12;
}

/**
 * Characters no string field may hold: C0 and C1 controls and DEL (an ESC sequence rewrites the
 * operator's terminal), line and paragraph separators, and the bidirectional embeddings,
 * overrides and isolates that make text read otherwise than it is stored.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

/** With the `u` flag a surrogate pair is one code point: what matches is a lone surrogate. */
const LONE_SURROGATE = /\p{Cs}/u;

/** Text that can be stored and printed as it is: no control character, no lone surrogate. */
const isPlainText = (v: string) => !CONTROL.test(v) && !LONE_SURROGATE.test(v);

/** What is wrong with a string field's text, if anything (never the value itself). */
function textProblem(v: string, freeText: boolean): string | undefined {
  const control = CONTROL.exec(v);
  if (control) {
    const code = control[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0');
    return `holds a control character (U+${code}); refused rather than stored or printed`;
  }
  if (LONE_SURROGATE.test(v)) return 'holds a lone UTF-16 surrogate';
  if (freeText && containsCardNumber(v)) {
    return 'holds what looks like a full card number (13 to 19 digits passing the Luhn check); only masked numbers are accepted';
  }
  return undefined;
}

const safeInt = z.number().refine(Number.isSafeInteger, 'must be a whole number within ±(2^53−1)');
const positiveId = z
  .number()
  .refine((v) => Number.isSafeInteger(v) && v > 0, 'must be a positive whole number within 2^53−1');
const text = (freeText: boolean) =>
  z.string().superRefine((v, ctx) => {
    const problem = textProblem(v, freeText);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });
/** A free-text field: plain text, and never a card number. */
const freeText = text(true);

const recordSchema = z.object({
  id: safeInt,
  // The token is opaque and sealed at rest, never shown: checked for control characters only (a
  // 32-hex-digit token holds 13 digits in a row often enough to be refused by the Luhn rule).
  cardToken: text(false).refine((v) => v.length > 0, 'must not be empty'),
  binNumber: z
    .string()
    .refine((v) => MASKED_BIN.test(v), 'must be a masked card number shaped dddd-xxxx-xxxx-dddd'),
  cardFamily: freeText,
  cardBankCode: safeInt,
  cardBankName: freeText,
  subscriberId: positiveId,
  companyId: safeInt,
  createDate: z.string().refine(isCreateDate, 'must be a date-time shaped YYYY-MM-DDThh:mm:ss+hh:mm'),
});

const FIELDS = Object.keys(recordSchema.shape) as (keyof SavedCard)[];

const plainString = (v: unknown): v is string => typeof v === 'string' && isPlainText(v);
const freeString = (v: unknown): v is string => plainString(v) && !containsCardNumber(v);

/**
 * The common case checked by hand: true only when {@link recordSchema} would accept every field.
 * It decides nothing else: a record it does not pass goes field by field through the schema, which
 * names the problem (test/unit/api-record-validation.test.ts holds the two to the same verdict). Zod's
 * per-field parse, with its issue objects, cost more than the fetch around it on a 5-card answer.
 */
function passesFastCheck(r: Record<string, unknown>): boolean {
  return (
    Number.isSafeInteger(r.id) &&
    plainString(r.cardToken) &&
    r.cardToken.length > 0 &&
    typeof r.binNumber === 'string' &&
    MASKED_BIN.test(r.binNumber) &&
    freeString(r.cardFamily) &&
    Number.isSafeInteger(r.cardBankCode) &&
    freeString(r.cardBankName) &&
    Number.isSafeInteger(r.subscriberId) &&
    (r.subscriberId as number) > 0 &&
    Number.isSafeInteger(r.companyId) &&
    typeof r.createDate === 'string' &&
    isCreateDate(r.createDate)
  );
}

/** The first problem of one record, in field order; undefined when the schema accepts it. */
export function recordProblem(record: Record<string, unknown>, index: number): string | undefined {
  for (const field of FIELDS) {
    const problem = fieldProblem(record, field, index);
    if (problem) return problem;
  }
  return undefined;
}

/** Why an answer was refused; the message names record index and field, never the value. */
export class InvalidResponse extends Error {
  override readonly name = 'InvalidResponse';
  readonly code = 'invalid_response';
}

function fieldProblem(
  record: Record<string, unknown>,
  field: keyof SavedCard,
  index: number,
): string | undefined {
  if (!(field in record)) return `record ${index}: field "${field}" is missing`;
  const value = record[field];
  const result = recordSchema.shape[field].safeParse(value);
  if (result.success) return undefined;
  const issue = result.error.issues[0];
  if (field === 'binNumber' && typeof value === 'string' && couldBeCardNumber(value)) {
    return `record ${index}: field "binNumber" looks like a full card number; only masked numbers are accepted`;
  }
  if (issue?.code === 'invalid_type') {
    const got = value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value;
    const want =
      field === 'id' || field === 'cardBankCode' || field === 'subscriberId' || field === 'companyId'
        ? 'integer'
        : 'string';
    return `record ${index}: field "${field}" must be ${want === 'integer' ? 'an integer' : 'a string'}, got ${got}`;
  }
  if (field === 'subscriberId') {
    return `record ${index}: field "subscriberId" must be a positive whole number within 2^53−1`;
  }
  if (field === 'id' || field === 'cardBankCode' || field === 'companyId') {
    return `record ${index}: field "${field}" must be a whole number within ±(2^53−1)`;
  }
  return `record ${index}: field "${field}" ${issue?.message ?? 'is invalid'}`;
}

/** What the answer is expected to describe. */
export interface Expectation {
  /** For an id lookup: every record must carry this subscriberId. */
  subscriberId?: number;
}

/**
 * Validates a parsed JSON body against docs/architecture.md and returns the cards, or throws
 * {@link InvalidResponse} with the first problem found. Unknown extra fields are dropped.
 */
export function parseCards(body: unknown, expect: Expectation = {}): SavedCard[] {
  if (!Array.isArray(body)) {
    const got = body === null ? 'null' : typeof body;
    throw new InvalidResponse(`the answer must be a JSON array of saved cards, got ${got}`);
  }
  const cards: SavedCard[] = [];
  const seen = new Map<number, number>();
  for (let index = 0; index < body.length; index++) {
    const record: unknown = body[index];
    if (record === null || typeof record !== 'object' || Array.isArray(record)) {
      throw new InvalidResponse(`record ${index}: must be an object`);
    }
    const r = record as Record<string, unknown>;
    if (!passesFastCheck(r)) {
      const problem = recordProblem(r, index);
      if (problem) throw new InvalidResponse(problem);
    }
    const card: SavedCard = {
      id: r.id as number,
      cardToken: r.cardToken as string,
      binNumber: r.binNumber as string,
      cardFamily: r.cardFamily as string,
      cardBankCode: r.cardBankCode as number,
      cardBankName: r.cardBankName as string,
      subscriberId: r.subscriberId as number,
      companyId: r.companyId as number,
      createDate: r.createDate as string,
    };
    const earlier = seen.get(card.id);
    if (earlier !== undefined) {
      throw new InvalidResponse(`record ${index}: field "id" repeats the id of record ${earlier}`);
    }
    seen.set(card.id, index);
    if (expect.subscriberId !== undefined && card.subscriberId !== expect.subscriberId) {
      throw new InvalidResponse(
        `record ${index}: field "subscriberId" names another subscriber than the one requested`,
      );
    }
    if (index > 0 && card.subscriberId !== cards[0]!.subscriberId) {
      throw new InvalidResponse(
        `record ${index}: field "subscriberId" differs from record 0; one answer must describe one subscriber`,
      );
    }
    cards.push(card);
  }
  return cards;
}
