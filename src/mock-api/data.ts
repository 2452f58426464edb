import { createHash } from 'node:crypto';
import type { SavedCard } from '../api/index.js';

/** Options of the deterministic data set. */
export interface MockDataOptions {
  /** Cards per subscriber; `undefined` = 1 to 4, chosen by the subscriber id. */
  cardsPerSubscriber?: number;
  /**
   * Changes every token, and bank names among each bank's own, as if the upstream data moved on.
   * Default 0.
   */
  generation?: number;
}

/**
 * The subscriber's wallet after `version` changes (`--changes`): each change issues every card a
 * new token, may show a bank under its other name (never another bank's, never a made-up one) and
 * may add or remove cards (1 to 4 of them, unless the count is fixed).
 */
export function cardsAtVersion(
  subscriberId: number,
  version: number,
  options: MockDataOptions = {},
): SavedCard[] {
  if (version === 0) return cardsFor(subscriberId, options);
  return cardsFor(subscriberId, {
    cardsPerSubscriber: cardCountAt(subscriberId, version, options),
    generation: (options.generation ?? 0) + version * 1_000_003,
  });
}

/** How many cards the wallet holds at `version` (its cards are the first that many of its ids). */
export function cardCountAt(subscriberId: number, version: number, options: MockDataOptions = {}): number {
  const seed = version === 0 ? digest('subscriber', subscriberId) : digest('count', subscriberId, version);
  return options.cardsPerSubscriber ?? 1 + (seed[0]! % 4);
}

// Each bank under the names the API shows it by: the short one of the provider's sample first
// (generation 0), then its legal name (docs/events.md example moves between the two). A change may
// switch one card between them; the bank code stays, so a per-bank report still finds 5 banks.
const BANKS = [
  { code: 100100000, names: ['AKBA', 'AKBANK T.A.S.'], bin: '4761' },
  { code: 100200000, names: ['GARANTI', 'T. GARANTI BANKASI A.S.'], bin: '5400' },
  { code: 100300000, names: ['YAPIKREDI', 'YAPI VE KREDI BANKASI A.S.'], bin: '4506' },
  { code: 100400000, names: ['ISBANK', 'T. IS BANKASI A.S.'], bin: '4508' },
  { code: 100500000, names: ['ZIRAAT', 'T.C. ZIRAAT BANKASI A.S.'], bin: '5170' },
];
const FAMILIES = ['Bonus', 'World', 'Axess', 'Maximum', ''];

/** The subscriber an e-mail stands for: `subscriber-<id>@…` or `…+<id>@…` name it; others hash. */
export function subscriberIdForEmail(email: string): number {
  const named = /^(?:subscriber-(\d{1,15})|[^@]*\+(\d{1,15}))@/i.exec(email);
  const id = Number(named?.[1] ?? named?.[2]);
  if (Number.isSafeInteger(id) && id > 0) return id;
  return (digest('email', email.toLowerCase()).readUInt32BE(0) % 900_000_000) + 100_000_000;
}

function cardId(subscriberId: number, k: number): number {
  const candidate = subscriberId * 16 + k;
  return Number.isSafeInteger(candidate) ? candidate : subscriberId - k;
}

/** The cards the sandbox reports for a subscriber: a few, stable across runs. */
export function cardsFor(subscriberId: number, options: MockDataOptions = {}): SavedCard[] {
  const generation = options.generation ?? 0;
  const seed = digest('subscriber', subscriberId);
  const count = options.cardsPerSubscriber ?? 1 + (seed[0]! % 4);
  const cards: SavedCard[] = [];
  for (let k = 0; k < count; k++) {
    cards.push(
      cardAt(subscriberId, k, {
        id: cardId(subscriberId, k),
        cardToken: digest('token', subscriberId, k, generation).toString('hex').slice(0, 32),
        bankName: (names) =>
          generation === 0
            ? names[0]!
            : names[digest('bank-name', subscriberId, k, generation)[0]! % names.length]!,
      }),
    );
  }
  return cards;
}

/**
 * Card `k` of a subscriber: its bank, number, family and company from (subscriber, k), its id, token
 * and bank name (one of the bank's own) as the caller says; its createDate from (subscriber, k), in
 * 2019–2024, unless `createdMs` is given.
 */
export function cardAt(
  subscriberId: number,
  k: number,
  own: { id: number; cardToken: string; bankName: (names: readonly string[]) => string; createdMs?: number },
): SavedCard {
  const h = digest('card', subscriberId, k);
  const bank = BANKS[h[0]! % BANKS.length]!;
  const last4 = String(h.readUInt16BE(1) % 10_000).padStart(4, '0');
  const day = new Date(
    Date.UTC(2019, 0, 1) + (h.readUInt32BE(3) % (6 * 365)) * 86_400_000 + (h[7]! % 86_400) * 1000,
  );
  return {
    id: own.id,
    cardToken: own.cardToken,
    binNumber: `${bank.bin}-xxxx-xxxx-${last4}`,
    cardFamily: FAMILIES[h[8]! % FAMILIES.length]!,
    cardBankCode: bank.code,
    cardBankName: own.bankName(bank.names),
    subscriberId,
    companyId: h[9]! % 3 === 0 ? -1 : (h[9]! % 50) + 1,
    createDate:
      own.createdMs === undefined ? `${day.toISOString().slice(0, 19)}+03:00` : istanbulDate(own.createdMs),
  };
}

/** The API's shape: the time of day in Istanbul, `+03:00`. */
export function istanbulDate(ms: number): string {
  return `${new Date(Math.floor(ms / 1000) * 1000 + 3 * 3_600_000).toISOString().slice(0, 19)}+03:00`;
}

/** A digest of the parts, for the sandbox's deterministic draws. */
export function digest(...parts: (string | number)[]): Buffer {
  return createHash('sha256').update(parts.join('|')).digest();
}
