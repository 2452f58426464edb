import type { ChangeClass } from '../../src/mock-api/changes.js';
import { simulate } from '../freshness/sim.js';
import type { RateClass, SimResult } from '../freshness/types.js';
import type { Settings } from './settings.js';

// What the simulator (bench/freshness/sim.ts) forecasts for the run's population, budget and
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

export function forecast(settings: Settings): Forecast {
  const { subscribers: n, classes, budget, minutes, warmupMin, maxAgeMs, auditShare, seed } = settings;
  const { sampleMs, createdDates, wakeUp, wallets, intake } = settings;
  const sim = (policy: 'oracle' | 'round-robin' | 'continuous') =>
    simulate(policy, {
      subscribers: n,
      classes: rateClasses(classes),
      budgetPerDay: budget * 86_400,
      days: minutes / 1440,
      warmupDays: warmupMin / 1440,
      windowsFromDays: warmupMin / 1440,
      maxAgeDays: maxAgeMs / 86_400_000,
      auditShare,
      seed,
      tickSeconds: 1,
      replanSeconds: Math.min(600, maxAgeMs / 5000),
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
    });
  return { oracle: sim('oracle'), roundRobin: sim('round-robin'), continuous: sim('continuous') };
}
