import { describe, expect, it } from 'vitest';
import { InvalidResponse, parseCards, recordProblem, type SavedCard } from '../../src/api/schema.js';
import { luhnNumber, notLuhn, otherScript, prng, written } from '../support/card-numbers.js';
import { makeCard } from '../support/fixtures.js';

const SUBSCRIBER = 4242;

/** A record as the JSON body carries it: any field may hold anything, or be left out. */
type RawRecord = Record<string, unknown>;

function card(overrides: RawRecord = {}): RawRecord {
  return { ...makeCard(SUBSCRIBER), ...overrides };
}

function without(field: string, record: RawRecord = card()): RawRecord {
  const copy = { ...record };
  delete copy[field];
  return copy;
}

/** The refusal of `parseCards(body)`; fails the test when the body is accepted. */
function refusal(body: unknown, expect_: { subscriberId?: number } = {}): InvalidResponse {
  try {
    parseCards(body, expect_);
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidResponse);
    expect((error as InvalidResponse).code).toBe('invalid_response');
    return error as InvalidResponse;
  }
  throw new Error('parseCards accepted the body');
}

/** Refused with a message naming record index and field, never quoting the value. */
function expectFieldRefused(body: unknown[], index: number, field: string, value?: unknown) {
  const error = refusal(body);
  expect(error.message).toMatch(new RegExp(`^record ${index}: field "${field}" `));
  if (typeof value === 'string' && value.length >= 3) expect(error.message).not.toContain(value);
  if (typeof value === 'number') expect(error.message).not.toContain(String(value));
  return error;
}

const FIELDS = [
  'id',
  'cardToken',
  'binNumber',
  'cardFamily',
  'cardBankCode',
  'cardBankName',
  'subscriberId',
  'companyId',
  'createDate',
] as const;
const INTEGER_FIELDS = new Set(['id', 'cardBankCode', 'subscriberId', 'companyId']);

describe('a valid answer', () => {
  it('returns every card as sent', () => {
    const cards = [makeCard(SUBSCRIBER), makeCard(SUBSCRIBER, { cardFamily: '', companyId: 77 })];
    expect(parseCards(JSON.parse(JSON.stringify(cards)))).toEqual(cards);
  });

  it('takes the provider sample as it is', () => {
    const sample = {
      id: 1,
      cardToken: '4f3c8a1bd0e94c2f9a7b6e5d4c3b2a10',
      binNumber: '4761-xxxx-xxxx-0043',
      cardFamily: 'Axess',
      cardBankCode: 100100000,
      cardBankName: 'AKBA',
      subscriberId: 10,
      companyId: -1,
      createDate: '2021-02-28T14:01:35+03:00',
    };
    expect(parseCards([sample], { subscriberId: 10 })).toEqual([sample]);
  });

  it('takes an empty array as "no cards"', () => {
    expect(parseCards([])).toEqual([]);
    expect(parseCards([], { subscriberId: SUBSCRIBER })).toEqual([]);
  });

  it('ignores unknown extra fields and does not return them', () => {
    const record = card({ cardHolder: 'ADA LOVELACE', expiry: { month: 1 }, isDefault: true });
    const [parsed] = parseCards([record]);
    expect(Object.keys(parsed!).sort()).toEqual([...FIELDS].sort());
    expect(parsed).not.toHaveProperty('cardHolder');
  });

  it('accepts the widest integers and negatives where the contract allows them', () => {
    const max = Number.MAX_SAFE_INTEGER;
    const [parsed] = parseCards([card({ id: max, cardBankCode: max, subscriberId: max, companyId: -max })]);
    expect(parsed).toMatchObject({ id: max, cardBankCode: max, subscriberId: max, companyId: -max });
  });
});

describe('the answer as a whole', () => {
  it.each([
    ['an object', { cards: [] }, 'object'],
    ['null', null, 'null'],
    ['a string', 'OK', 'string'],
    ['a number', 0, 'number'],
  ])('refuses %s instead of an array', (_what, body, got) => {
    const error = refusal(body);
    expect(error.message).toContain('JSON array');
    expect(error.message).toContain(got);
  });

  it.each([
    ['null', null],
    ['a number', 7],
    ['a string', 'card'],
    ['an array', [card()]],
    ['a boolean', true],
  ])('refuses a record that is %s, naming its index', (_what, record) => {
    const error = refusal([card(), record]);
    expect(error.message).toBe('record 1: must be an object');
  });
});

describe('each of the nine fields', () => {
  it.each(FIELDS)('refuses a record without "%s"', (field) => {
    const error = expectFieldRefused([card(), without(field)], 1, field);
    expect(error.message).toContain('missing');
  });

  it.each(FIELDS)('refuses null in "%s"', (field) => {
    const error = expectFieldRefused([card({ [field]: null })], 0, field);
    expect(error.message).toContain('got null');
  });

  it.each(FIELDS)('refuses the wrong type in "%s"', (field) => {
    const wrong = INTEGER_FIELDS.has(field) ? '4242' : 4761000000000043;
    const error = expectFieldRefused([card({ [field]: wrong })], 0, field, wrong);
    expect(error.message).toContain(INTEGER_FIELDS.has(field) ? 'an integer' : 'a string');
    expect(error.message).toContain(`got ${typeof wrong}`);
  });

  it.each(FIELDS)('refuses an object or an array in "%s"', (field) => {
    expect(refusal([card({ [field]: { value: 1 } })]).message).toContain(`field "${field}"`);
    expect(refusal([card({ [field]: [1] })]).message).toContain(`field "${field}"`);
  });

  it.each(['id', 'cardBankCode', 'subscriberId', 'companyId'])('refuses a fraction in "%s"', (field) => {
    expectFieldRefused([card({ [field]: 12.5 })], 0, field, 12.5);
  });

  it.each(['id', 'cardBankCode', 'subscriberId', 'companyId'])('refuses "%s" beyond 2^53−1', (field) => {
    // What JSON.parse makes of an id the upstream wrote with more precision than a double holds.
    const [parsed] = JSON.parse(`[{"${field}": 9007199254740993}]`) as [RawRecord];
    const error = expectFieldRefused([card({ [field]: parsed[field] })], 0, field);
    expect(error.message).toContain('2^53');
    expectFieldRefused([card({ [field]: -(2 ** 53) })], 0, field);
    expectFieldRefused([card({ [field]: 1e300 })], 0, field);
  });

  it('refuses an empty cardToken but accepts an empty cardFamily and cardBankName', () => {
    const error = expectFieldRefused([card({ cardToken: '' })], 0, 'cardToken');
    expect(error.message).toContain('empty');
    expect(parseCards([card({ cardFamily: '', cardBankName: '' })])).toHaveLength(1);
  });

  it.each(['cardToken', 'cardFamily', 'cardBankName'])('refuses a NUL character in "%s"', (field) => {
    const value = `secret-part\u0000tail-part`;
    const error = expectFieldRefused([card({ [field]: value })], 0, field, value);
    expect(error.message).toContain('control character (U+0000)');
    expect(error.message).not.toContain('secret-part');
  });

  it('refuses a NUL in binNumber and createDate', () => {
    expectFieldRefused([card({ binNumber: '4761-xxxx-xxxx-0043\u0000' })], 0, 'binNumber');
    expectFieldRefused([card({ createDate: '2021-02-28T14:01:35+03:00\u0000' })], 0, 'createDate');
  });

  it('never puts a card token into a refusal', () => {
    const token = 'deadbeefdeadbeefdeadbeefdeadbeef';
    const error = refusal([card({ cardToken: token, createDate: 'yesterday' })]);
    expect(error.message).not.toContain(token);
    expect(error.message).toMatch(/^record 0: field "createDate"/);
  });

  it('names the index of the first bad record', () => {
    const body = [card(), card(), card(), card({ companyId: '-1' }), card({ id: 'x' })];
    expect(refusal(body).message).toMatch(/^record 3: field "companyId"/);
  });
});

describe('binNumber', () => {
  it.each(['4761-xxxx-xxxx-0043', '5400-XXXX-XXXX-1234', '3792-****-****-0001', '4761-xX*x-**XX-0043'])(
    'accepts the mask %s',
    (bin) => {
      expect(parseCards([card({ binNumber: bin })])[0]!.binNumber).toBe(bin);
    },
  );

  it.each([
    ['16 digits', '4761730000000043'],
    ['digits with spaces', '4761 7300 0000 0043'],
    ['dddd-dddd-dddd-dddd', '4761-7300-0000-0043'],
    ['19 digits', '6011730000000000043'],
    ['a partly masked number with 12 digits', '4761-73xx-0000-0043'],
  ])('refuses %s as a full card number, without quoting it', (_what, bin) => {
    const error = expectFieldRefused([card({ binNumber: bin })], 0, 'binNumber', bin);
    expect(error.message).toContain('full card number');
    expect(error.message).not.toMatch(/4761|0043|7300/);
  });

  it.each([
    ['3 digits at the end', '4761-xxxx-xxxx-004'],
    ['a masked group of 3', '4761-xxx-xxxx-0043'],
    ['another mask character', '4761-####-####-0043'],
    ['no hyphens', '4761xxxxxxxx0043'],
    ['a mask in the last group', '4761-xxxx-xxxx-xx43'],
    ['surrounding blanks', ' 4761-xxxx-xxxx-0043 '],
    ['an empty string', ''],
  ])('refuses a bin with %s', (_what, bin) => {
    const error = expectFieldRefused([card({ binNumber: bin })], 0, 'binNumber', bin);
    expect(error.message).toContain('dddd-xxxx-xxxx-dddd');
  });
});

describe('createDate', () => {
  it.each([
    '2021-02-28T14:01:35+03:00',
    '2021-02-28T14:01:35-05:00',
    '2021-02-28T14:01:35+00:00',
    '2021-02-28T14:01:35.123+03:00',
    '2021-02-28T14:01:35.123456789-03:30',
    '2024-02-29T00:00:00+14:00',
    '1999-12-31T23:59:59-12:00',
  ])('accepts %s as sent', (date) => {
    expect(parseCards([card({ createDate: date })])[0]!.createDate).toBe(date);
  });

  it.each([
    ['a Z suffix', '2021-02-28T14:01:35Z'],
    ['no offset', '2021-02-28T14:01:35'],
    ['an offset without colon', '2021-02-28T14:01:35+0300'],
    ['February 30', '2021-02-30T14:01:35+03:00'],
    ['February 29 of a common year', '2023-02-29T14:01:35+03:00'],
    ['April 31', '2021-04-31T14:01:35+03:00'],
    ['month 13', '2021-13-01T14:01:35+03:00'],
    ['month 00', '2021-00-10T14:01:35+03:00'],
    ['day 00', '2021-02-00T14:01:35+03:00'],
    ['hour 24', '2021-02-28T24:00:00+03:00'],
    ['minute 60', '2021-02-28T14:60:35+03:00'],
    ['second 60', '2021-02-28T14:01:60+03:00'],
    ['offset +15:00', '2021-02-28T14:01:35+15:00'],
    ['offset minutes 60', '2021-02-28T14:01:35+03:60'],
    ['a space for T', '2021-02-28 14:01:35+03:00'],
    ['no seconds', '2021-02-28T14:01+03:00'],
    ['a date alone', '2021-02-28'],
    ['an empty fraction', '2021-02-28T14:01:35.+03:00'],
    ['an epoch number as string', '1614510095'],
    ['a JS date string', 'Sun Feb 28 2021 14:01:35 GMT+0300'],
  ])('refuses a createDate with %s', (_what, date) => {
    const error = expectFieldRefused([card({ createDate: date })], 0, 'createDate', date);
    expect(error.message).toContain('YYYY-MM-DDThh:mm:ss+hh:mm');
  });
});

describe('rules across records', () => {
  it('refuses duplicate ids, naming both records', () => {
    const first = makeCard(SUBSCRIBER);
    const body = [first, makeCard(SUBSCRIBER), makeCard(SUBSCRIBER, { id: first.id })];
    const error = refusal(body);
    expect(error.message).toMatch(/^record 2: field "id" /);
    expect(error.message).toContain('record 0');
    expect(error.message).not.toContain(String(first.id));
  });

  it('refuses, for an id lookup, a record of another subscriber', () => {
    const error = refusal([makeCard(SUBSCRIBER)], { subscriberId: SUBSCRIBER + 1 });
    expect(error.message).toMatch(/^record 0: field "subscriberId" /);
    expect(error.message).toContain('another subscriber');
    expect(error.message).not.toContain(String(SUBSCRIBER));
  });

  it('refuses, for an id lookup, another subscriber hidden after good records', () => {
    const body = [makeCard(SUBSCRIBER), makeCard(SUBSCRIBER), makeCard(SUBSCRIBER + 1)];
    expect(refusal(body, { subscriberId: SUBSCRIBER }).message).toMatch(/^record 2: field "subscriberId" /);
  });

  it('refuses an answer mixing subscribers even without an expected one (e-mail lookup)', () => {
    const body = [makeCard(SUBSCRIBER), makeCard(SUBSCRIBER + 1)];
    const error = refusal(body);
    expect(error.message).toMatch(/^record 1: field "subscriberId" /);
  });

  it('accepts an e-mail lookup answer of one subscriber, whichever it is', () => {
    const cards: SavedCard[] = [makeCard(99), makeCard(99)];
    expect(parseCards(cards)).toEqual(cards);
  });
});

// parseCards passes the common shape by hand and sends anything else through the schema: the two
// must agree on every record, or a record the schema refuses could slip through the fast path.
describe('the hand-checked fast path', () => {
  const ODD_VALUES: unknown[] = [
    undefined,
    null,
    true,
    0,
    -1,
    1.5,
    2 ** 53,
    -(2 ** 53),
    Number.MAX_SAFE_INTEGER,
    -7,
    '',
    ' ',
    '0',
    'Bonus',
    'a\u0000b',
    '4761-xxxx-xxxx-0043',
    '4761-XXXX-****-0043',
    '4761-xxxx-xxxx-004',
    '4761 xxxx xxxx 0043',
    '4761123412340043',
    'VISA 4111.1111.1111.1111',
    '5500/0055/5555/5559',
    '\u001b[31mred',
    'a\u0085b',
    'a\u202eb',
    'a\ud800',
    '2021-02-28T14:01:35+03:00',
    '2021-02-28T14:01:35.123456789-00:30',
    '2021-02-29T14:01:35+03:00',
    '2024-02-29T23:59:59+14:00',
    '2021-02-28T24:00:00+03:00',
    '2021-02-28T14:01:35Z',
    '2021-02-28 14:01:35+03:00',
    [],
    {},
    [1],
  ];

  it('accepts exactly the records the schema accepts, for every field and odd value', () => {
    let accepted = 0;
    let refused = 0;
    for (const field of FIELDS) {
      for (const value of ODD_VALUES) {
        const record = value === undefined ? without(field) : card({ [field]: value });
        const schemaSays = recordProblem(record, 0);
        let parsed: SavedCard[] | undefined;
        try {
          parsed = parseCards([record]);
        } catch (error) {
          expect(error).toBeInstanceOf(InvalidResponse);
          expect((error as Error).message).toBe(schemaSays);
        }
        expect(parsed === undefined, `${field} = ${JSON.stringify(value)}`).toBe(schemaSays !== undefined);
        if (parsed) accepted++;
        else refused++;
      }
    }
    // Both verdicts were exercised, for every field.
    expect(accepted).toBeGreaterThan(FIELDS.length);
    expect(refused).toBeGreaterThan(FIELDS.length * 10);
  });
});

describe('free text never holds a full card number', () => {
  it('refuses one in cardFamily or cardBankName, at every length and with any separators, naming record and field only', () => {
    const random = prng(4242);
    for (let i = 0; i < 500; i++) {
      const field = i % 2 === 0 ? 'cardBankName' : 'cardFamily';
      const number = written(luhnNumber(13 + (i % 7), random), random);
      const value = [`VISA ${number}`, number, `${number} Platinum`][i % 3]!;
      const body = [card(), card({ [field]: value })];
      const error = expectFieldRefused(body, 1, field, value);
      // A tab between the groups is refused as a control character first.
      expect(error.message).toMatch(/full card number|control character \(U\+0009\)/);
      expect(error.message.replace(/\D/g, '').length, error.message).toBeLessThan(6);
    }
  });

  it('also in the digits of other scripts', () => {
    expectFieldRefused([card({ cardBankName: otherScript('4111111111111111', 0xff10) })], 0, 'cardBankName');
  });

  it('takes text with fewer digits, or digits that fail the Luhn check', () => {
    const ok = ['Bonus 2021', 'AKBA 0043', notLuhn('4111111111111111'), 'World Elite'];
    for (const value of ok)
      expect(parseCards([card({ cardBankName: value, cardFamily: value })])).toHaveLength(1);
  });
});

describe('string fields never hold control characters', () => {
  const CONTROLS = [
    '\u001b[2J',
    '\u001b]0;owned\u0007',
    '\r',
    '\n',
    '\t',
    '\u007f',
    '\u0085',
    '\u009b31m',
    '\u2028',
    '\u202e',
    '\u2066',
  ];
  it.each(['cardToken', 'cardFamily', 'cardBankName'])(
    'refuses each in "%s", naming its code point',
    (field) => {
      for (const control of CONTROLS) {
        const value = `AKBA${control}tail`;
        const error = expectFieldRefused([card({ [field]: value })], 0, field, value);
        expect(error.message).toMatch(/control character \(U\+[0-9A-F]{4}\)/);
      }
    },
  );

  it('refuses a lone surrogate, takes a pair (an emoji) and letters of any script', () => {
    expectFieldRefused([card({ cardBankName: 'AKBA\ud800' })], 0, 'cardBankName');
    expect(parseCards([card({ cardBankName: 'Ziraat Bankası 💳', cardFamily: 'بطاقة' })])).toHaveLength(1);
  });
});

describe('subscriberId', () => {
  it.each([0, -7, -(2 ** 53 - 1)])('refuses %s: a subscriber no command could reach again', (id) => {
    const error = expectFieldRefused([card({ subscriberId: id })], 0, 'subscriberId');
    expect(error.message).toContain('positive');
  });
});
