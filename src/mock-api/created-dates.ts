import { createHash } from 'node:crypto';
import type { SavedCard } from '../../db/sync/index.js';
import type { WalletChanges } from './changes.js';
import { cardCountAt, type MockDataOptions } from './data.js';

// `--created-dates from-changes`: a world in which the cards' createDates say how the
// wallet lives. A change that adds a card stamps it with the change's time; a wallet's first cards
// carry dates drawn from the same process before the start (its additions seen backwards); a
// wallet that never changes (or only wakes later) keeps its years-old dates. `random`, the
// default, is the control: every card's date is drawn from 2019–2024 whatever its wallet does.

export type CreatedDates = 'random' | 'from-changes';

export function parseCreatedDates(value: string): CreatedDates {
  if (value === 'random' || value === 'from-changes') return value;
  throw new Error(`--created-dates takes random or from-changes, not ${JSON.stringify(value)}`);
}

/** The share of changes that add a given card position (the count is drawn afresh, 1 to 4: 3 in 8 add one). */
const ADD_SHARE = 3 / 8;
/** No date before this many years before the start. */
const OLDEST_YEARS = 6;

function uniform(...parts: (string | number)[]): number {
  return createHash('sha256').update(parts.join('|')).digest().readUIntBE(0, 6) / 2 ** 48;
}

/** The API's shape: the time of day in Istanbul, `+03:00`. */
export function istanbulDate(ms: number): string {
  return `${new Date(Math.floor(ms / 1000) * 1000 + 3 * 3_600_000).toISOString().slice(0, 19)}+03:00`;
}

/**
 * When card `k` (its position in the wallet) was last added, as of `version`: the change that
 * made it appear, or, when it has been there since the start, a date from the wallet's own rate
 * before the start (card 0 the newest); null for a wallet that did not change before the start.
 */
function cardCreatedAt(
  changes: WalletChanges,
  subscriberId: number,
  k: number,
  version: number,
  startMs: number,
  seed: number,
  options: MockDataOptions = {},
): number | null {
  for (let v = version; v >= 1; v--) {
    if (k >= cardCountAt(subscriberId, v - 1, options)) return changes.changedAt(subscriberId, v);
  }
  const rate = changes.wokenAt(subscriberId) === null ? changes.rateOf(subscriberId) * ADD_SHARE : 0;
  if (!(rate > 0)) return null;
  let back = 0;
  for (let j = 0; j <= k; j++) back += -Math.log(1 - uniform('created', seed, subscriberId, j)) / rate;
  return startMs - Math.min(back * 1000, OLDEST_YEARS * 365 * 86_400_000);
}

/** The wallet's cards at `version` with the createDates of the `from-changes` world. */
export function datedFromChanges(
  cards: readonly SavedCard[],
  changes: WalletChanges,
  subscriberId: number,
  version: number,
  startMs: number,
  seed: number,
  options: MockDataOptions = {},
): SavedCard[] {
  return cards.map((card, k) => {
    const at = cardCreatedAt(changes, subscriberId, k, version, startMs, seed, options);
    return at === null ? card : { ...card, createDate: istanbulDate(at) };
  });
}
