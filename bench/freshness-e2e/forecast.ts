import type { ChangeClass } from '../../src/mock-api/changes.js';
import {
  type RateClass,
  type SimResult,
  simRetune,
  simulate,
} from '../../test/support/freshness-sim/index.js';
import type { Settings } from './settings.js';

// What the simulator (test/support/freshness-sim/sim.ts) forecasts for the run's population, budget and
// max age, in the run's world (createDates, wake-up, kinds of change, intake): the two set-ups,
// and an oracle that knows every rate, for the report to set beside what the sandbox measured.
// Its windows are the run's: the minutes after the warm-up in thirds (learning, middle, end).

export interface Forecast {
  oracle: SimResult;
  roundRobin: SimResult;
  continuous: SimResult;
}

/** `--changes`' classes as the simulator's, the rest of the population never changing. */
export function rateClasses(classes: readonly ChangeClass[]): RateClass[] {
  const out: RateClass[] = classes.map((c) => ({
    label: c.perSecond === 0 ? 'never' : `${(c.perSecond * 3600).toPrecision(3)}/h`,
    share: c.share,
    ratePerDay: c.perSecond * 86_400,
  }));
  const restShare = 1 - classes.reduce((s, c) => s + c.share, 0);
  if (restShare > 1e-9) out.push({ label: 'never', share: restShare, ratePerDay: 0 });
  return out;
}

/**
 * How often the run's refresh plans, and its workers read the plan, at a max age: every fifth of
 * it (10 s to 10 min, jobs/refresh/continuous.ts) and every twentieth (at most 30 s, db/refresh/policy.ts).
 */
function cadences(maxAgeMs: number): { replanSeconds: number; workerPlanSeconds: number } {
  return {
    replanSeconds: Math.min(600, Math.max(10, maxAgeMs / 5000)),
    workerPlanSeconds: Math.min(30, Math.max(0.2, maxAgeMs / 20_000)),
  };
}

export function forecast(settings: Settings): Forecast {
  const { subscribers: n, classes, budget, minutes, warmupMin, maxAgeMs, auditShare, seed } = settings;
  const { sampleMs, createdDates, wakeUp, wallets, intake, retune } = settings;
  const sim = (policy: 'oracle' | 'round-robin' | 'continuous') =>
    simulate(policy, {
      subscribers: n,
      classes: rateClasses(classes),
      budgetPerDay: budget * 86_400,
      days: minutes / 1440,
      warmupDays: warmupMin / 1440,
      // The windows of SimResult.windows: the thirds after the warm-up, as the report's.
      windowsFromDays: warmupMin / 1440,
      maxAgeDays: maxAgeMs / 86_400_000,
      auditShare,
      seed,
      tickSeconds: 1,
      // As the run's refresh: a plan every fifth of the max age (10 s to 10 min, jobs/refresh/continuous.ts),
      // read by the workers every twentieth of it (at most 30 s, db/refresh/policy.ts), and every
      // subscriber known and never synced at the start.
      ...cadences(maxAgeMs),
      neverSynced: true,
      snapshotSeconds: sampleMs / 1000,
      createdDates,
      ...(wakeUp
        ? {
            wakeUp: {
              share: wakeUp.share,
              ratePerDay: wakeUp.perSecond * 86_400,
              atDays: wakeUp.afterMs / 86_400_000,
            },
          }
        : {}),
      ...(wallets ? { wallets } : {}),
      ...(intake ? { intake: { share: intake.share, atDays: intake.afterMs / 86_400_000 } } : {}),
      ...(retune ? { retune: simRetune(retune, cadences(maxAgeMs * retune.maxAgeFactor)) } : {}),
    });
  return { oracle: sim('oracle'), roundRobin: sim('round-robin'), continuous: sim('continuous') };
}
