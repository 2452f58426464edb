// One observation of a subscriber's wallet between two syncs, and the window of them it keeps.
// Its own module because the estimate, the mixture, the evidence and the change-point all read it.

/** How many of a subscriber's latest observations its estimate keeps (`subscribers.change_observations`). */
const OBSERVATIONS_KEPT = 32;

/**
 * One observation: the interval in days between two successful syncs, negative when the second
 * found the cards changed (so one `real[]` column holds both). An interval of 0 cannot carry the
 * sign: it is stored as the smallest interval this keeps (about a tenth of a second).
 */
export type Observation = number;

/** The shortest interval an observation records, in days. */
export const SMALLEST_INTERVAL_DAYS = 1e-6;

export function observation(intervalDays: number, changed: boolean): Observation {
  const t = Math.max(SMALLEST_INTERVAL_DAYS, intervalDays);
  return changed ? -t : t;
}

/**
 * Appends one observation, keeping the latest {@link OBSERVATIONS_KEPT}. An unchanged interval that
 * follows an unchanged one is merged into it: the likelihood of two quiet intervals, e^{−λt₁}·e^{−λt₂},
 * is that of one quiet interval t₁ + t₂, so nothing is lost, and the window is counted in changes
 * rather than in syncs. Counted in syncs, it would forget a change fastest where the change made
 * the syncs come fastest, and every busy wallet would be read as quieter than it is (the simulator
 * measured wallets changing 12 times an hour estimated at 3 to 6).
 */
export function appendObservation(previous: readonly Observation[] | null, next: Observation): Observation[] {
  const all = [...(previous ?? [])];
  const last = all.at(-1);
  if (next > 0 && last !== undefined && last > 0) all[all.length - 1] = last + next;
  else all.push(next);
  return all.length > OBSERVATIONS_KEPT ? all.slice(all.length - OBSERVATIONS_KEPT) : all;
}
