import { MS_PER_DAY, replanEveryMs } from '../../../src/freshness/index.js';
import { mulberry32 as rng } from './rng.js';
import type { RateClass, SimOptions } from './types.js';

// A family of worlds, drawn at random over what an operator can meet (docs/refresh.md, "What the
// refresh promises"): fleets of 1,000 to 1,000,000 subscribers, a budget from a tenth of one sync
// per subscriber per max age to a hundred, max ages from 5 minutes to the 7-day default, class
// mixes with and without fast wallets, createDates that carry the signal, say nothing or mislead,
// and one event of an operator's life: an intake, a wake-up, a mass change or a retune. A world is
// a pure function of the family's seed and its index, so `--world I --seed S` reruns it alone.

/** One world of the family, in an operator's terms, and the simulator's options for it. */
export interface FamilyWorld {
  index: number;
  /** The family's seed: with the index, all it takes to draw the world again. */
  seed: number;
  /** The subscribers of the fleet drawn. */
  fleet: number;
  /** The subscribers simulated: the fleet, or {@link SIMULATED_AT_MOST} with the same budget per subscriber. */
  simulated: number;
  /** Syncs per subscriber per max age the refresh may spend. */
  budgetPerMaxAge: number;
  maxAgeDays: number;
  /** Whether some wallets change more than once per max age. */
  fast: boolean;
  classes: RateClass[];
  createdDates: 'random' | 'from-changes' | 'predating';
  event: 'none' | 'intake' | 'wake-up' | 'mass-change' | 'retune';
  /** What the event is, in a few words (empty for none). */
  eventAbout: string;
  options: SimOptions;
}

/**
 * At most this many subscribers are simulated; a larger fleet is simulated at this size with the
 * same budget per subscriber, max age and mix, so a world of a million costs what one of two
 * thousand does. What scales with the fleet is the audit's sample (its share of a larger budget is
 * more draws) and the plan's sample (production fits on 20,000): the simulated world errs on the
 * side of the smaller fleet, whose audit knows less.
 */
export const SIMULATED_AT_MOST = 2000;

/** Max ages the run lasts; the figures count all of it, learning included. */
const RUN_MAX_AGES = 6;

const logUniform = (u: number, lo: number, hi: number) =>
  Math.exp(Math.log(lo) + u * (Math.log(hi) - Math.log(lo)));

const MINUTE_DAYS = 1 / 1440;

/**
 * How often a world's plan is made: every fifth of its max age (`family`, the default), or as often
 * as production makes it (`production`, src/freshness `replanEveryMs`: every 10 minutes at most). The
 * two part only past a 50-minute max age, where production plans far more often: every 10 minutes of
 * a week's max age for six max ages is 6,048 plans a world, so the family's default is the faster to
 * run. A tick of the simulator (a 300th of the max age) is the finest either plans at.
 */
export type Cadence = 'family' | 'production';

function replanSecondsOf(maxAgeDays: number, tickSeconds: number, cadence: Cadence): number {
  const every =
    cadence === 'production' ? replanEveryMs(maxAgeDays * MS_PER_DAY) / 1000 : (maxAgeDays * 86_400) / 5;
  return Math.max(tickSeconds, every);
}

/** Draws world `index` of the family of `seed`. */
export function drawWorld(
  seed: number,
  index: number,
  simulatedAtMost = SIMULATED_AT_MOST,
  cadence: Cadence = 'family',
): FamilyWorld {
  // A stream per world: a world does not depend on how many were drawn before it.
  const u = rng((seed * 2_654_435_761) ^ ((index + 1) * 40_503));
  for (let k = 0; k < 4; k++) u();
  const fleet = Math.round(logUniform(u(), 1_000, 1_000_000));
  const simulated = Math.min(fleet, simulatedAtMost);
  const budgetPerMaxAge = logUniform(u(), 0.1, 100);
  const maxAgeDays = logUniform(u(), 5 * MINUTE_DAYS, 7);
  // Rates in changes per max age, turned into per day at the end.
  const perMaxAge: { share: number; rate: number }[] = [];
  const never = 0.3 + 0.6 * u();
  const fast = u() < 0.5;
  const fastShare = fast ? logUniform(u(), 0.01, 0.15) : 0;
  const slowClasses = 1 + Math.floor(u() * 3);
  const slowShare = 1 - never - fastShare;
  for (let k = 0; k < slowClasses; k++)
    perMaxAge.push({ share: slowShare / slowClasses, rate: logUniform(u(), 0.02, 1) });
  if (fast) {
    const fastClasses = 1 + Math.floor(u() * 2);
    for (let k = 0; k < fastClasses; k++)
      perMaxAge.push({ share: fastShare / fastClasses, rate: logUniform(u(), 2, 60) });
  }
  const classes: RateClass[] = [
    { label: 'never', share: never, ratePerDay: 0 },
    ...perMaxAge.map((c) => ({
      label: `${+c.rate.toPrecision(2)}/max age`,
      share: c.share,
      ratePerDay: c.rate / maxAgeDays,
    })),
  ];
  const dates = u();
  const createdDates = dates < 1 / 3 ? 'random' : dates < 2 / 3 ? 'from-changes' : 'predating';
  const events = ['none', 'intake', 'wake-up', 'mass-change', 'retune'] as const;
  const event = events[Math.floor(u() * events.length)]!;
  const days = RUN_MAX_AGES * maxAgeDays;
  const atDays = 2 * maxAgeDays;
  const tickSeconds = Math.max(1, (maxAgeDays * 86_400) / 300);
  const options: SimOptions = {
    subscribers: simulated,
    classes,
    budgetPerDay: (budgetPerMaxAge * simulated) / maxAgeDays,
    days,
    warmupDays: 0,
    maxAgeDays,
    auditShare: 0.02,
    seed: (seed ^ (index * 97)) >>> 0,
    createdDates,
    tickSeconds,
    replanSeconds: replanSecondsOf(maxAgeDays, tickSeconds, cadence),
    snapshotSeconds: Math.max(tickSeconds, (maxAgeDays * 86_400) / 30),
    auditWeight: fleet / simulated,
  };
  let eventAbout = '';
  const e = u();
  const f = u();
  if (event === 'intake') {
    const share = 0.1 + 0.4 * e;
    options.intake = { share, atDays };
    eventAbout = `${Math.round(share * 100)}% arrive at 2 max ages`;
  } else if (event === 'wake-up') {
    const share = 0.05 + 0.25 * e;
    const rate = logUniform(f, 1, 20);
    options.wakeUp = { share, ratePerDay: rate / maxAgeDays, atDays };
    eventAbout = `${Math.round(share * 100)}% of the quiet wake at ${+rate.toPrecision(2)}/max age`;
  } else if (event === 'mass-change') {
    options.massChange = { atDays };
    eventAbout = 'every token reissued at 2 max ages';
  } else if (event === 'retune') {
    const budgetFactor = e < 0.5 ? 0.5 : 2;
    const maxAgeFactor = f < 0.5 ? 0.5 : 2;
    options.retune = {
      atDays,
      budgetFactor,
      maxAgeFactor,
      replanSeconds: replanSecondsOf(maxAgeDays * maxAgeFactor, tickSeconds, cadence),
    };
    eventAbout = `budget ×${budgetFactor}, max age ×${maxAgeFactor} at 2 max ages`;
  }
  return {
    index,
    seed,
    fleet,
    simulated,
    budgetPerMaxAge,
    maxAgeDays,
    fast,
    classes,
    createdDates,
    event,
    eventAbout,
    options,
  };
}

/** A max age as an operator writes it (`REFRESH_MAX_AGE`). */
export function formatMaxAge(days: number): string {
  const ms = days * MS_PER_DAY;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)}m`;
  if (ms < 2 * MS_PER_DAY) return `${+(ms / 3_600_000).toFixed(1)}h`;
  return `${+days.toFixed(1)}d`;
}

/** One line that says what the world is. */
export function describeWorld(w: FamilyWorld): string {
  const mix = w.classes
    .filter((c) => c.share > 0)
    .map((c) => `${+(c.share * 100).toFixed(1)}% ${c.label}`)
    .join(', ');
  return (
    `${w.fleet} subscribers${w.simulated < w.fleet ? ` (${w.simulated} simulated)` : ''}, ` +
    `${+w.budgetPerMaxAge.toPrecision(2)} syncs per subscriber per max age, max age ${formatMaxAge(w.maxAgeDays)}, ` +
    `${mix}; createDates ${w.createdDates}${w.event === 'none' ? '' : `; ${w.event}: ${w.eventAbout}`}`
  );
}

/** The max age a family world is compressed to for real (bench:freshness-e2e `--family`). */
const E2E_MAX_AGE_SECONDS = 120;
/** At most this many requests a second for real, each set-up: what two cores serve beside the other. */
const E2E_BUDGET_AT_MOST = 150;

/** What `--family S:I` sets for a real run: the world's flags and the run's shape. */
export interface FamilyE2eFlags {
  subscribers: string;
  budget: string;
  'max-age': string;
  minutes: string;
  warmup: string;
  changes: string;
  'created-dates': string;
  'wake-up'?: string;
  intake?: string;
  retune?: string;
}

/**
 * World I of the family of S as the end-to-end run makes it: its max age compressed to 2 minutes,
 * its six max ages run whole (figures from the start: learning counts, as in the family's
 * figures), at most 2,000 subscribers with the same budget per subscriber per max age (fewer where
 * that budget would pass 150 requests a second), the classes at the same rates per max age, the
 * event at 2 max ages. Throws a one-line message for a spec that is not `S:I`, and for a mass
 * change, which the sandbox cannot make mid-run (its tokens are reissued only at start,
 * `mock-api --generation`).
 */
export function familyE2eFlags(spec: string): FamilyE2eFlags {
  const m = /^\s*(\d+)\s*:\s*(\d+)\s*$/.exec(spec);
  if (!m)
    throw new Error(
      `--family takes SEED:WORLD, two whole numbers (e.g. 4417:12), not ${JSON.stringify(spec)}`,
    );
  const w = drawWorld(Number(m[1]), Number(m[2]));
  if (w.event === 'mass-change') {
    throw new Error(
      `--family ${spec}: world ${w.index} is a mass change, which the sandbox cannot make mid-run (it reissues tokens only at start); pick another`,
    );
  }
  const perHour = (perMaxAge: number) => +((perMaxAge * 3600) / E2E_MAX_AGE_SECONDS).toPrecision(4);
  // A retune that doubles the budget doubles the requests: the cap holds after it.
  const atMost = E2E_BUDGET_AT_MOST / Math.max(1, w.options.retune?.budgetFactor ?? 1);
  const budget = Math.max(
    1,
    Math.round(Math.min(atMost, (w.budgetPerMaxAge * w.simulated) / E2E_MAX_AGE_SECONDS)),
  );
  const subscribers = Math.max(10, Math.round((budget * E2E_MAX_AGE_SECONDS) / w.budgetPerMaxAge));
  // The shares rounded down, so that they never sum past 1; the quiet class takes what is left.
  const changing = w.classes
    .filter((c) => c.share > 0 && c.ratePerDay > 0)
    .map((c) => ({ share: Math.floor(c.share * 1e4) / 1e4, perHour: perHour(c.ratePerDay * w.maxAgeDays) }));
  const quiet = Math.floor((1 - changing.reduce((sum, c) => sum + c.share, 0)) * 1e4) / 1e4;
  const changes = [`${quiet}:0`, ...changing.map((c) => `${c.share}:${c.perHour}/h`)].join(',');
  const at = `${(2 * E2E_MAX_AGE_SECONDS) / 60}m`;
  const flags: FamilyE2eFlags = {
    subscribers: String(subscribers),
    budget: String(budget),
    'max-age': `${E2E_MAX_AGE_SECONDS / 60}m`,
    minutes: String((RUN_MAX_AGES * E2E_MAX_AGE_SECONDS) / 60),
    warmup: '0',
    changes,
    'created-dates': w.createdDates,
  };
  const o = w.options;
  if (o.intake) flags.intake = `${+o.intake.share.toPrecision(3)}@${at}`;
  if (o.wakeUp)
    flags['wake-up'] =
      `${+o.wakeUp.share.toPrecision(3)}:${perHour(o.wakeUp.ratePerDay * w.maxAgeDays)}/h@${at}`;
  if (o.retune) flags.retune = `budget:${o.retune.budgetFactor},max-age:${o.retune.maxAgeFactor}@${at}`;
  return flags;
}
