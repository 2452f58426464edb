import { type ChangeClass, parseChanges, parseWakeUp, type WakeUp } from '../../src/mock-api/changes.js';
import type { CreatedDates } from '../../src/mock-api/created-dates.js';
import { durationMs } from '../../src/shared/time.js';
import { wholeNumber } from '../harness.js';

// bench:freshness-e2e's flags, checked and turned into the run's settings.

export interface Settings {
  subscribers: number;
  minutes: number;
  /** Minutes before figures are taken. */
  warmupMin: number;
  /** Requests a second, for both set-ups. */
  budget: number;
  maxAgeMs: number;
  sampleMs: number;
  auditShare: number;
  seed: number;
  createdDates: CreatedDates;
  classes: ChangeClass[];
  wakeUp: WakeUp | undefined;
  /** The flags as given, for the report's header and the workers' environment. */
  flags: {
    maxAge: string;
    sample: string;
    changes: string;
    wakeUp: string | undefined;
    chart: string | undefined;
    redisUrl: string | undefined;
  };
}

/** bench:freshness-e2e's flags as parseFlags gives them (declared in bench/freshness-e2e.ts). */
export interface Flags {
  subscribers?: string;
  minutes?: string;
  warmup?: string;
  budget?: string;
  'max-age'?: string;
  'audit-share'?: string;
  changes?: string;
  'created-dates'?: string;
  'wake-up'?: string;
  sample?: string;
  seed?: string;
  chart?: string;
  'redis-url'?: string;
}

/** The flags, checked: a bad one exits with status 2 and says why. */
export function readSettings(values: Flags): Settings {
  const n = wholeNumber('subscribers', values.subscribers, 10);
  const minutes = wholeNumber('minutes', values.minutes, 2);
  const warmupMin = wholeNumber('warmup', values.warmup, 0);
  const budget = wholeNumber('budget', values.budget, 1);
  const maxAgeMs = durationMs(values['max-age']!);
  const sampleMs = durationMs(values.sample!);
  const auditShare = Number(values['audit-share']);
  const seed = wholeNumber('seed', values.seed, 0);
  if (!maxAgeMs || !sampleMs || !(auditShare >= 0 && auditShare < 1) || warmupMin >= minutes) {
    console.error(
      '--max-age and --sample take durations (5m, 10s), --audit-share 0 to <1, --warmup < --minutes',
    );
    process.exit(2);
  }
  const createdDates = values['created-dates'] as CreatedDates;
  if (createdDates !== 'random' && createdDates !== 'from-changes') {
    console.error(`--created-dates takes random or from-changes, not ${JSON.stringify(createdDates)}`);
    process.exit(2);
  }
  let classes: ChangeClass[];
  let wakeUp: WakeUp | undefined;
  try {
    classes = parseChanges(values.changes!);
    wakeUp = values['wake-up'] === undefined ? undefined : parseWakeUp(values['wake-up']);
  } catch (error) {
    console.error((error as Error).message);
    process.exit(2);
  }
  return {
    subscribers: n,
    minutes,
    warmupMin,
    budget,
    maxAgeMs,
    sampleMs,
    auditShare,
    seed,
    createdDates,
    classes,
    wakeUp,
    flags: {
      maxAge: values['max-age']!,
      sample: values.sample!,
      changes: values.changes!,
      wakeUp: values['wake-up'],
      chart: values.chart,
      redisUrl: values['redis-url'],
    },
  };
}
