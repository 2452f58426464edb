import type { SavedCard } from '../api/index.js';
import type { WalletChanges } from './changes.js';
import { type CreatedDates, historyDate, predatingDate } from './created-dates.js';
import { cardAt, digest } from './data.js';

// `--change-kinds` (with `--wallet-cards`): wallets whose changes are of stated kinds, instead of
// the default in which every change issues every card a new token and draws the card count afresh.
// A wallet holds `minCards` to `maxCards` cards (its count at the start drawn in that range); each
// change is one of:
// - `add`: a card is saved (at the maximum, the oldest card goes as it comes);
// - `remove`: one of the cards goes (at the minimum, the change is a replacement instead);
// - `replace`: one card is reissued in place: a new token, its bank shown under its other name,
//   the same id and the same createDate.
// Only an addition brings a new createDate, so in a world of removals and replacements the
// createDates say little of how often a wallet changes. The kind of the k-th change, and which card
// it touches, are drawn from (seed, subscriber, k) like the changes themselves (src/mock-api/changes.ts).

/** Shares of the kinds of change, summing to 1. */
export interface ChangeKinds {
  add: number;
  remove: number;
  replace: number;
}

/** How the wallets of `--change-kinds` live. */
export interface WalletRules {
  /** At least 1: a wallet emptied by removals would read as a wipe to the mass-removal breaker. */
  minCards: number;
  maxCards: number;
  kinds: ChangeKinds;
}

/** The most cards a wallet may hold (`--wallet-cards`). */
const MAX_WALLET_CARDS = 50;
/** Card ids per subscriber: an added card takes the next; after this many a slot's id comes back. */
const IDS_PER_WALLET = 1024;

/** `add:0.5,remove:0.25,replace:0.25` → the shares (a kind left out: 0); throws a one-line message on anything else. */
export function parseChangeKinds(spec: string): ChangeKinds {
  const kinds: ChangeKinds = { add: 0, remove: 0, replace: 0 };
  const seen = new Set<string>();
  for (const part of spec.split(',')) {
    const m = /^\s*(add|remove|replace)\s*:\s*(\d*\.?\d+)\s*$/.exec(part);
    const share = Number(m?.[2]);
    if (!m || !(share >= 0 && share <= 1) || seen.has(m[1]!)) {
      throw new Error(
        `--change-kinds takes kind:share pairs (add, remove, replace, each once; shares from 0 to 1 summing to 1), not ${JSON.stringify(part)}`,
      );
    }
    seen.add(m[1]!);
    kinds[m[1] as keyof ChangeKinds] = share;
  }
  const total = kinds.add + kinds.remove + kinds.replace;
  if (Math.abs(total - 1) > 1e-9) throw new Error(`--change-kinds: the shares sum to ${total}, not 1`);
  return kinds;
}

/** `1-5` → a wallet holds 1 to 5 cards; throws a one-line message on anything else. */
export function parseWalletCards(spec: string): { minCards: number; maxCards: number } {
  const m = /^\s*(\d{1,3})\s*-\s*(\d{1,3})\s*$/.exec(spec);
  const minCards = Number(m?.[1]);
  const maxCards = Number(m?.[2]);
  if (!m || minCards < 1 || maxCards < minCards || maxCards > MAX_WALLET_CARDS) {
    throw new Error(
      `--wallet-cards takes MIN-MAX cards, 1 ≤ MIN ≤ MAX ≤ ${MAX_WALLET_CARDS} (e.g. 1-5), not ${JSON.stringify(spec)}`,
    );
  }
  return { minCards, maxCards };
}

/** A uniform draw in [0, 1) from the parts, the same every time. */
function uniform(...parts: (string | number)[]): number {
  return digest(...parts).readUIntBE(0, 6) / 2 ** 48;
}

interface Card {
  /** Its place among the wallet's ids: the k-th card ever added (those held at the start first). */
  slot: number;
  /** Its createDate, ms; undefined: the data set's own (2019–2024). */
  createdMs: number | undefined;
  /** How many times it was reissued in place. */
  reissues: number;
}

interface Wallet {
  version: number;
  nextSlot: number;
  /** Oldest first. */
  cards: Card[];
}

/** What one change of a wallet did (for tests and the simulator's twin, test/support/freshness-sim/world.ts). */
type ChangeKind = keyof ChangeKinds;

/** The wallets of a `--change-kinds` world: each one's cards after a given number of changes. */
export interface Wallets {
  /** The subscriber's cards after `version` changes. */
  cardsAt(subscriberId: number, version: number): SavedCard[];
  /** The kind of the subscriber's `version`-th change (from 1), as it played out (at a bound, the kind it became). */
  kindOf(subscriberId: number, version: number): ChangeKind;
}

/**
 * The wallets of `rules`, their changes at the times of `changes`. A wallet's createDates follow
 * `createdDates`: `from-changes` dates its cards held at the start from its additions seen
 * backwards (at its rate × the share of additions), `predating` 2 to 6 years before the start;
 * both date an added card at its change; `random` keeps every card's own date.
 */
export function wallets(
  rules: WalletRules,
  changes: WalletChanges,
  createdDates: CreatedDates,
  startMs: number,
  seed: number,
): Wallets {
  const { minCards, maxCards, kinds } = rules;
  const state = new Map<number, Wallet>();
  const played = new Map<number, ChangeKind[]>();

  const atStart = (id: number): Wallet => {
    const count = minCards + Math.floor(uniform('wallet-count', seed, id) * (maxCards - minCards + 1));
    const addPerSecond = changes.wokenAt(id) === null ? changes.rateOf(id) * kinds.add : 0;
    const cards: Card[] = [];
    for (let slot = 0; slot < count; slot++) {
      const back = count - 1 - slot; // 0: the newest
      const createdMs =
        createdDates === 'predating'
          ? predatingDate(id, back, startMs, seed)
          : createdDates === 'from-changes'
            ? (historyDate(id, back, addPerSecond, startMs, seed) ?? undefined)
            : undefined;
      cards.push({ slot, createdMs, reissues: 0 });
    }
    played.set(id, []);
    return { version: 0, nextSlot: count, cards };
  };

  const play = (id: number, w: Wallet): void => {
    const v = w.version + 1;
    const draw = uniform('kind', seed, id, v);
    let kind: ChangeKind = draw < kinds.add ? 'add' : draw < kinds.add + kinds.remove ? 'remove' : 'replace';
    const which = Math.floor(uniform('which', seed, id, v) * w.cards.length);
    if (kind === 'remove' && w.cards.length <= minCards) kind = 'replace';
    if (kind === 'add') {
      if (w.cards.length >= maxCards) w.cards.shift();
      const createdMs = createdDates === 'random' ? undefined : changes.changedAt(id, v);
      w.cards.push({ slot: w.nextSlot, createdMs, reissues: 0 });
      w.nextSlot += 1;
    } else if (kind === 'remove') {
      w.cards.splice(which, 1);
    } else {
      const card = w.cards[which]!;
      w.cards[which] = { ...card, reissues: card.reissues + 1 };
    }
    played.get(id)!.push(kind);
    w.version = v;
  };

  const walletAt = (id: number, version: number): Wallet => {
    let w = state.get(id);
    // Moments come in time order; an earlier version than the last asked is played again from the start.
    if (!w || w.version > version) {
      w = atStart(id);
      state.set(id, w);
    }
    while (w.version < version) play(id, w);
    return w;
  };

  return {
    cardsAt(id, version) {
      return walletAt(id, version).cards.map((c) => {
        const k = c.slot % IDS_PER_WALLET;
        const candidate = id * IDS_PER_WALLET + k;
        return cardAt(id, c.slot, {
          id: Number.isSafeInteger(candidate) ? candidate : id - k,
          cardToken: digest('token', id, c.slot, 'reissue', c.reissues).toString('hex').slice(0, 32),
          bankName: (names) => names[c.reissues % names.length]!,
          ...(c.createdMs !== undefined ? { createdMs: c.createdMs } : {}),
        });
      });
    },
    kindOf(id, version) {
      walletAt(id, Math.max(version, state.get(id)?.version ?? 0));
      return played.get(id)![version - 1]!;
    },
  };
}
