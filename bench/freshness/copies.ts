import { type Copy, type Evidence, MS_PER_DAY, type Observation } from '../../src/freshness/index.js';
import type { SimOptions } from './types.js';

// What the service holds of each wallet, as its subscribers' rows do: the last sync, the
// observations and the rate estimated from them, and the newest createDate its last answer carried.

export interface Copies {
  readonly lastSync: Float64Array;
  readonly rate: (number | null)[];
  readonly observations: (Observation[] | null)[];
  /** The newest card's createDate as the last answer had it (the world's at that sync). */
  readonly seenNewest: Float64Array;
  /** The evidence the policy reads at `now`; null with `evidence: false`. */
  evidenceAt(id: number, now: number): Evidence | null;
  /** Every copy, as the estimate of the stale share reads them. */
  all(): Iterable<Copy>;
}

/** Everyone loaded once at time 0 (a first sync), with no observation yet. */
export function createCopies(o: SimOptions, newestCreated: Float64Array): Copies {
  const n = o.subscribers;
  const seenNewest = Float64Array.from(newestCreated);
  const useEvidence = o.evidence !== false;
  const lastSync = new Float64Array(n);
  const rate: (number | null)[] = new Array(n).fill(null);
  return {
    lastSync,
    rate,
    observations: new Array(n).fill(null),
    seenNewest,
    evidenceAt: (id, now) =>
      useEvidence ? { newestCardAgeDays: (now - seenNewest[id]!) / MS_PER_DAY, cards: 1 } : null,
    *all() {
      for (let id = 0; id < n; id++) yield { ratePerDay: rate[id]!, lastSuccessAt: lastSync[id]! };
    },
  };
}
