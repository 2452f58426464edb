import { type Copy, type Evidence, MS_PER_DAY, type Observation } from '../../src/freshness/index.js';
import type { SimOptions } from './types.js';
import { intakeIds } from './world.js';

// What the service holds of each wallet, as its subscribers' rows do: the last sync, the
// observations and the rate estimated from them, and the newest createDate its last answer carried.

export interface Copies {
  readonly lastSync: Float64Array;
  readonly rate: (number | null)[];
  readonly observations: (Observation[] | null)[];
  /** The newest card's createDate as the last answer had it (the world's at that sync). */
  readonly seenNewest: Float64Array;
  /** 1 once the service holds a row for the subscriber: everyone at the start but an intake's subscribers, until their first sync. */
  readonly known: Uint8Array;
  /** The evidence the policy reads at `now`; null with `evidence: false`. */
  evidenceAt(id: number, now: number): Evidence | null;
  /** Every copy the service holds, as the estimate of the stale share reads them. */
  all(): Iterable<Copy>;
}

/** Everyone loaded once at time 0 (a first sync), with no observation yet; an intake's subscribers not yet. */
export function createCopies(o: SimOptions, newestCreated: Float64Array): Copies {
  const n = o.subscribers;
  const known = new Uint8Array(n).fill(1);
  if (o.intake) for (const id of intakeIds(n, o.intake.share, o.seed)) known[id] = 0;
  const seenNewest = Float64Array.from(newestCreated);
  const useEvidence = o.evidence !== false;
  const lastSync = new Float64Array(n);
  const rate: (number | null)[] = new Array(n).fill(null);
  return {
    lastSync,
    rate,
    observations: new Array(n).fill(null),
    seenNewest,
    known,
    evidenceAt: (id, now) =>
      useEvidence ? { newestCardAgeDays: (now - seenNewest[id]!) / MS_PER_DAY, cards: 1 } : null,
    *all() {
      for (let id = 0; id < n; id++) {
        if (known[id]) yield { ratePerDay: rate[id]!, lastSuccessAt: lastSync[id]! };
      }
    },
  };
}
