import { MS_PER_DAY } from '../../../src/freshness/index.js';
import { mulberry32 as rng } from './rng.js';
import type { SimOptions } from './types.js';

// The simulated upstream: each wallet's true rate of change, the moment of its next change (a
// Poisson process), the createDate of its newest card, the quiet wallets that wake up and the
// subscribers that arrive later (`intake`). The policy never reads it; it learns it only through
// syncs (sim.ts). The sandbox's twin of each world is in src/mock-api/.

/** The share of changes that add a card (the sandbox: 1 to 4 cards drawn afresh at each change). */
const ADD_SHARE = 3 / 8;
const YEAR_MS = 365 * MS_PER_DAY;

/**
 * The subscribers of an intake: exactly `round(share × n)` of the ids 0 to n − 1, drawn by a
 * seeded shuffle (the simulator's world and bench:freshness-e2e, whose ids are these plus one).
 */
export function intakeIds(n: number, share: number, seed: number): Set<number> {
  // A stream of its own, so that an intake world keeps its base world's population and changes.
  const random = rng(seed ^ 0x1b873593);
  const ids = Array.from({ length: n }, (_, i) => i);
  const count = Math.round(share * n);
  for (let i = 0; i < count; i++) {
    const j = i + Math.floor(random() * (n - i));
    [ids[i], ids[j]] = [ids[j]!, ids[i]!];
  }
  return new Set(ids.slice(0, count));
}

/** The seeded streams the world draws from; `random` is shared with the rest of the run. */
export interface WorldStreams {
  random: () => number;
  changes: () => number;
  cards: () => number;
}

export interface World {
  /** True changes per day, by id; 0 = never. */
  readonly trueRate: Float64Array;
  /** When each wallet next changes, ms (+∞: never). */
  readonly nextChange: Float64Array;
  /** The createDate of each wallet's newest card, ms. */
  readonly newestCreated: Float64Array;
  /** 1 for the wallets that woke (`wakeUp`). */
  readonly woken: Uint8Array;
  /** When each subscriber becomes known to the service, ms: 0, or the intake's time for those it brings. */
  readonly arrivesAt: Float64Array;
  /** How many cards the wallet holds (with `wallets`; otherwise the one whose date is kept). */
  cardsHeld(id: number): number;
  /** Draws the wallet's next change after `from`. */
  drawChange(id: number, from: number): void;
  /** Plays a wallet's changes up to `now` (it has changed), then draws its next one. */
  advance(id: number, now: number): void;
  /** Every wallet changes at `now` (every token reissued): the next change of each is now. */
  changeAll(now: number): void;
  /** Wakes quiet wallets at `wakeUp`'s rate; `onWoken` runs for each as it wakes. */
  wake(now: number, wakeUp: { share: number; ratePerDay: number }, onWoken: (id: number) => void): void;
}

export function createWorld(o: SimOptions, { random, changes, cards }: WorldStreams): World {
  const n = o.subscribers;
  // The population: classes in shuffled order over the ids, so id order says nothing.
  const trueRate = new Float64Array(n);
  {
    let id = 0;
    for (const c of o.classes) {
      const count = Math.round(c.share * n);
      for (let k = 0; k < count && id < n; k++) trueRate[id++] = c.ratePerDay;
    }
    for (let i = n - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [trueRate[i], trueRate[j]] = [trueRate[j]!, trueRate[i]!];
    }
  }
  const nextChange = new Float64Array(n);
  const drawChange = (id: number, from: number) => {
    const rate = trueRate[id]!;
    nextChange[id] =
      rate > 0 ? from + (-Math.log(1 - changes()) / rate) * MS_PER_DAY : Number.POSITIVE_INFINITY;
  };
  // The newest card's createDate.
  const fromChanges = o.createdDates === 'from-changes';
  // `predating` dates the cards held at the start years back, as `random` does, and an added card
  // at its change, as `from-changes` does.
  const stamps = o.createdDates === 'from-changes' || o.createdDates === 'predating';
  const newestCreated = new Float64Array(n);
  const held = o.wallets ? walletCards(o, trueRate, cards) : null;
  for (let id = 0; id < n && !held; id++) {
    // As the sandbox dates them: `predating` 2 to 6 years back, the others 1 to 6 (2019–2024 in 2026).
    const u = cards();
    const years = (o.createdDates === 'predating' ? 2 + 4 * u : 1 + 5 * u) * 365 * MS_PER_DAY;
    const rate = trueRate[id]! * ADD_SHARE;
    newestCreated[id] =
      fromChanges && rate > 0 ? Math.max(-years, (Math.log(1 - cards()) / rate) * MS_PER_DAY) : -years;
  }
  if (held) {
    for (const [id, dates] of held.entries()) newestCreated[id] = Math.max(...dates);
  }
  const woken = new Uint8Array(n);
  // Who wakes is drawn from a stream of its own: the same wallets wake whatever the policy drew
  // from `random` before (the policies draw differently, and the woken counted 684 to 767 of one world).
  const waking = rng(o.seed ^ 0x85ebca6b);
  for (let id = 0; id < n; id++) drawChange(id, 0);
  const arrivesAt = new Float64Array(n);
  if (o.intake) {
    for (const id of intakeIds(n, o.intake.share, o.seed)) arrivesAt[id] = o.intake.atDays * MS_PER_DAY;
  }
  return {
    trueRate,
    nextChange,
    newestCreated,
    woken,
    arrivesAt,
    cardsHeld: (id) => (held ? held[id]!.length : 1),
    drawChange,
    advance(id, now) {
      const rate = trueRate[id]! * MS_PER_DAY ** -1;
      if (held && o.wallets) {
        // Each change is of a kind (src/mock-api/wallets.ts): only an addition brings a new date.
        const { minCards, maxCards, kinds } = o.wallets;
        const dates = held[id]!;
        for (let at = nextChange[id]!; at <= now; at += -Math.log(1 - cards()) / rate) {
          const draw = cards();
          const which = Math.floor(cards() * dates.length);
          if (draw < kinds.add) {
            if (dates.length >= maxCards) dates.shift();
            dates.push(stamps ? at : -(1 + 5 * cards()) * YEAR_MS);
          } else if (draw < kinds.add + kinds.remove && dates.length > minCards) dates.splice(which, 1);
        }
        newestCreated[id] = Math.max(...dates);
      } else if (stamps) {
        // The changes since the last sync, each adding a card with ADD_SHARE; the newest stamps it.
        for (let at = nextChange[id]!; at <= now; at += -Math.log(1 - cards()) / rate) {
          if (cards() < ADD_SHARE) newestCreated[id] = at;
        }
      }
      drawChange(id, now);
    },
    changeAll(now) {
      for (let id = 0; id < n; id++) nextChange[id] = Math.min(nextChange[id]!, now);
    },
    wake(now, wakeUp, onWoken) {
      for (let id = 0; id < n; id++) {
        if (trueRate[id] === 0 && waking() < wakeUp.share) {
          trueRate[id] = wakeUp.ratePerDay;
          woken[id] = 1;
          drawChange(id, now);
          onWoken(id);
        }
      }
    },
  };
}

/**
 * `wallets`: each wallet's cards' createDates, oldest first, as the sandbox's twin holds them
 * (src/mock-api/wallets.ts): `minCards` to `maxCards` of them; `from-changes` dates them from the
 * wallet's additions seen backwards (at most 6 years), `predating` 2 to 6 years back, `random` 1 to
 * 6 years back whatever the wallet does.
 */
function walletCards(o: SimOptions, trueRate: Float64Array, cards: () => number): number[][] {
  const { minCards, maxCards, kinds } = o.wallets!;
  const held: number[][] = [];
  for (let id = 0; id < o.subscribers; id++) {
    const count = minCards + Math.floor(cards() * (maxCards - minCards + 1));
    const addPerDay = trueRate[id]! * kinds.add;
    const dates: number[] = [];
    let back = 0;
    for (let k = 0; k < count; k++) {
      if (o.createdDates === 'predating') dates.push(-(2 + 4 * cards()) * YEAR_MS);
      else if (o.createdDates === 'from-changes' && addPerDay > 0) {
        back += (-Math.log(1 - cards()) / addPerDay) * MS_PER_DAY;
        dates.push(-Math.min(back, 6 * YEAR_MS));
      } else dates.push(-(1 + 5 * cards()) * YEAR_MS);
    }
    held.push(dates.sort((a, b) => a - b));
  }
  return held;
}
