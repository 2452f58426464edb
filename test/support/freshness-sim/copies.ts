import { type Copy, type Evidence, MS_PER_DAY, type Observation } from '../../../src/freshness/index.js';
import type { SimOptions } from './types.js';
import { intakeIds } from './world.js';

// What the service holds of each wallet, as its subscribers' rows do: the last sync, the
// observations and the rate estimated from them, and the newest createDate its last answer carried.

export interface Copies {
  /** The last sync, ms; NaN while never synced. */
  readonly lastSync: Float64Array;
  readonly rate: (number | null)[];
  /** The rate the estimate reads (src/freshness `ScheduleUpdate.staleRatePerDay`), as the row's `stale_rate_per_day`. */
  readonly staleRate: (number | null)[];
  readonly observations: (Observation[] | null)[];
  /** The newest card's createDate as the last answer had it (the world's at that sync). */
  readonly seenNewest: Float64Array;
  /**
   * 1 once the service holds a row for the subscriber: everyone at the start but an intake's
   * subscribers, until they arrive ({@link arrive}).
   */
  readonly known: Uint8Array;
  /**
   * An intake's subscriber arrives: `cards-sync enqueue` registers an id it does not know as a
   * known, never-synced row, so from then on the estimate counts it (stale: nothing is stored).
   */
  arrive(id: number): void;
  /** The last sync as the subscriber's row has it: null while never synced. */
  lastSuccessAt(id: number): number | null;
  /** The evidence the plan reads (the last answer's, as of its sync); null with `evidence: false` or before the first sync. */
  evidenceAt(id: number, now: number): Evidence | null;
  /** The evidence of an answer read at `now`, as the sync hands it to the policy; null with `evidence: false`. */
  answerEvidence(id: number, now: number): Evidence | null;
  /** Every copy the service holds, as the estimate of the stale share reads them. */
  all(): Iterable<Copy>;
}

/**
 * Everyone loaded once at time 0 (a first sync), with no observation yet; with `neverSynced`,
 * everyone known and never synced, as bench:freshness-e2e starts: a first sync then observes
 * nothing (there is no interval before it), as a worker's first success does. An intake's
 * subscribers are neither known nor synced until they arrive, then known and never synced.
 */
export function createCopies(o: SimOptions, newestCreated: Float64Array, neverSynced = false): Copies {
  const n = o.subscribers;
  const known = new Uint8Array(n).fill(1);
  const seenNewest = Float64Array.from(newestCreated);
  const useEvidence = o.evidence !== false;
  const lastSync = new Float64Array(n).fill(neverSynced ? Number.NaN : 0);
  if (o.intake) {
    for (const id of intakeIds(n, o.intake.share, o.seed)) {
      known[id] = 0;
      lastSync[id] = Number.NaN;
    }
  }
  const rate: (number | null)[] = new Array(n).fill(null);
  const staleRate: (number | null)[] = new Array(n).fill(null);
  const observations: (Observation[] | null)[] = new Array(n).fill(null);
  const lastSuccessAt = (id: number) => (Number.isNaN(lastSync[id]!) ? null : lastSync[id]!);
  const answerEvidence = (id: number, now: number): Evidence | null =>
    useEvidence ? { newestCardAgeDays: (now - seenNewest[id]!) / MS_PER_DAY, cards: 1 } : null;
  return {
    lastSync,
    rate,
    staleRate,
    observations,
    seenNewest,
    known,
    arrive: (id) => {
      known[id] = 1;
    },
    lastSuccessAt,
    // As the plan reads it from the table (db/refresh/evidence.ts): the newest card's age at the
    // last success, where the observations end, not at the plan's time.
    evidenceAt: (id) => {
      const at = lastSuccessAt(id);
      return at !== null ? answerEvidence(id, at) : null;
    },
    answerEvidence,
    *all() {
      for (let id = 0; id < n; id++) {
        if (!known[id]) continue;
        const seen = observations[id];
        yield {
          ratePerDay: rate[id]!,
          staleRatePerDay: staleRate[id]!,
          lastSuccessAt: lastSuccessAt(id),
          observed: seen != null && seen.length > 0,
        };
      }
    },
  };
}
