import { MS_PER_DAY } from '../../src/freshness/index.js';
import type { SimOptions } from './types.js';

// The simulated upstream: each wallet's true rate of change, the moment of its next change (a
// Poisson process), the createDate of its newest card, and the quiet wallets that wake up. The
// policy never reads it; it learns it only through syncs (bench/freshness/sim.ts).

/** The share of changes that add a card (the sandbox: 1 to 4 cards drawn afresh at each change). */
const ADD_SHARE = 3 / 8;

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
  /** Draws the wallet's next change after `from`. */
  drawChange(id: number, from: number): void;
  /** Plays a wallet's changes up to `now` (it has changed), then draws its next one. */
  advance(id: number, now: number): void;
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
  const newestCreated = new Float64Array(n);
  for (let id = 0; id < n; id++) {
    const years = (1 + 5 * cards()) * 365 * MS_PER_DAY;
    const rate = trueRate[id]! * ADD_SHARE;
    newestCreated[id] =
      fromChanges && rate > 0 ? Math.max(-years, (Math.log(1 - cards()) / rate) * MS_PER_DAY) : -years;
  }
  const woken = new Uint8Array(n);
  for (let id = 0; id < n; id++) drawChange(id, 0);
  return {
    trueRate,
    nextChange,
    newestCreated,
    woken,
    drawChange,
    advance(id, now) {
      // The changes since the last sync, each adding a card with ADD_SHARE; the newest stamps it.
      if (fromChanges) {
        const rate = trueRate[id]! * MS_PER_DAY ** -1;
        for (let at = nextChange[id]!; at <= now; at += -Math.log(1 - cards()) / rate) {
          if (cards() < ADD_SHARE) newestCreated[id] = at;
        }
      }
      drawChange(id, now);
    },
    wake(now, wakeUp, onWoken) {
      for (let id = 0; id < n; id++) {
        if (trueRate[id] === 0 && random() < wakeUp.share) {
          trueRate[id] = wakeUp.ratePerDay;
          woken[id] = 1;
          drawChange(id, now);
          onWoken(id);
        }
      }
    },
  };
}
