import type { Freshness } from '../../db/refresh/index.js';

const pct = (x: number) => `${(x * 100).toFixed(2)}%`;

/**
 * What the stale estimate covers and how sure it is, in one sentence: its interval if every rate is
 * right, and how many subscribers it knows by their own syncs, by the population's rate alone
 * (synced once) or not at all (never synced: stale for sure). `status` and the overview say this.
 */
export function estimateBasis(f: Pick<Freshness, 'estimate'>): string {
  const e = f.estimate;
  return (
    `the estimate's 95% interval if the rates are right: ${pct(e.low)} – ${pct(e.high)}; it covers ${e.covers} subscribers: ` +
    `${e.learned} by their own syncs, ${e.syncedOnce} synced once (at the population's rate: ` +
    `${(e.fromPopulationRate * 100).toFixed(2)} points of the estimate), ${e.neverSynced} never synced (stale for sure)` +
    (e.notUpstream > 0 ? `; ${e.notUpstream} never synced and not found upstream are left out` : '')
  );
}
