import { createHash } from 'node:crypto';
import type { SavedCard } from '../../db/sync/index.js';
import type { WalletChanges } from './changes.js';
import { cardCountAt, istanbulDate, type MockDataOptions } from './data.js';

export { istanbulDate };

// `--created-dates from-changes`: a world in which the cards' createDates say how the
// wallet lives. A change that adds a card stamps it with the change's time; a wallet's first cards
// carry dates drawn from the same process before the start (its additions seen backwards); a
// wallet that never changes (or only wakes later) keeps its years-old dates. `random`, the
// default, is the control: every card's date is drawn from 2019–2024 whatever its wallet does.
// `predating`: the cards a wallet holds at the start were saved years before it (2 to 6 years,
// whatever the wallet's rate, as cards saved long before the service began), and only a card
// added during the run carries its change's time: the first answers say nothing, later ones do.

export type CreatedDates = 'random' | 'from-changes' | 'predating';

const CREATED_DATES: readonly CreatedDates[] = ['random', 'from-changes', 'predating'];

export function parseCreatedDates(value: string): CreatedDates {
  const found = CREATED_DATES.find((c) => c === value);
  if (found) return found;
  throw new Error(`--created-dates takes random, from-changes or predating, not ${JSON.stringify(value)}`);
}

/** The share of changes that add a given card position (the count is drawn afresh, 1 to 4: 3 in 8 add one). */
const ADD_SHARE = 3 / 8;
/** No date before this many years before the start. */
const OLDEST_YEARS = 6;
/** `predating`: a card held at the start was saved this many years before it, at least. */
const PREDATING_YEARS = 2;
const YEAR_MS = 365 * 86_400_000;

function uniform(...parts: (string | number)[]): number {
  return createHash('sha256').update(parts.join('|')).digest().readUIntBE(0, 6) / 2 ** 48;
}

/** `predating`: when card `k` of a wallet, held since the start, was saved: 2 to 6 years before it. */
export function predatingDate(subscriberId: number, k: number, startMs: number, seed: number): number {
  const years =
    PREDATING_YEARS + (OLDEST_YEARS - PREDATING_YEARS) * uniform('predating', seed, subscriberId, k);
  return startMs - years * YEAR_MS;
}

/**
 * Card `k` of a wallet held since the start, as the `from-changes` world dates it: its additions
 * at `addPerSecond` seen backwards from the start (card 0 the newest, card 1 before it, …), at
 * most {@link OLDEST_YEARS} back; null for a wallet that adds nothing (it keeps the data set's date).
 */
export function historyDate(
  subscriberId: number,
  k: number,
  addPerSecond: number,
  startMs: number,
  seed: number,
): number | null {
  if (!(addPerSecond > 0)) return null;
  let back = 0;
  for (let j = 0; j <= k; j++)
    back += -Math.log(1 - uniform('created', seed, subscriberId, j)) / addPerSecond;
  return startMs - Math.min(back * 1000, OLDEST_YEARS * YEAR_MS);
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
  options: MockDataOptions,
  history: 'from-changes' | 'predating',
): number | null {
  for (let v = version; v >= 1; v--) {
    if (k >= cardCountAt(subscriberId, v - 1, options)) return changes.changedAt(subscriberId, v);
  }
  if (history === 'predating') return predatingDate(subscriberId, k, startMs, seed);
  const rate = changes.wokenAt(subscriberId) === null ? changes.rateOf(subscriberId) * ADD_SHARE : 0;
  return historyDate(subscriberId, k, rate, startMs, seed);
}

/** The wallet's cards at `version` with the createDates of the `from-changes` (or `predating`) world. */
export function datedFromChanges(
  cards: readonly SavedCard[],
  changes: WalletChanges,
  subscriberId: number,
  version: number,
  startMs: number,
  seed: number,
  options: MockDataOptions = {},
  history: 'from-changes' | 'predating' = 'from-changes',
): SavedCard[] {
  return cards.map((card, k) => {
    const at = cardCreatedAt(changes, subscriberId, k, version, startMs, seed, options, history);
    return at === null ? card : { ...card, createDate: istanbulDate(at) };
  });
}
