import { type ChangeClass, parseChanges, parseWakeUp, type WakeUp } from '../../src/mock-api/changes.js';
import { type CreatedDates, parseCreatedDates } from '../../src/mock-api/created-dates.js';
import type { WalletRules } from '../../src/mock-api/wallets.js';
import { durationMs } from '../../src/shared/time.js';
import {
  familyE2eFlags,
  parseIntake,
  parseRetune,
  readWallets,
  type WorldFlags,
  worldFlags,
} from '../../test/support/freshness-sim/index.js';
import { wholeNumber } from '../harness.js';

// bench:freshness-e2e's flags, checked and turned into the run's settings.

/**
 * The flags of a run, as parseFlags declares them (bench:freshness-e2e adds `--chart`;
 * bench:freshness-worlds takes the run's own and sets the world's). The world's flags have no
 * default here, so that `--world` can set them: readSettings applies the defaults after it.
 */
export const E2E_OPTIONS = {
  /** Default 10,000, or the world's. */
  subscribers: { type: 'string' },
  minutes: { type: 'string', default: '15' },
  warmup: { type: 'string', default: '5' },
  /** Requests a second: default 150, or the world's. */
  budget: { type: 'string' },
  'max-age': { type: 'string', default: '5m' },
  'audit-share': { type: 'string', default: '0.02' },
  /** A world of test/support/freshness-sim/worlds.ts: its flags, unless given beside it. */
  world: { type: 'string' },
  /**
   * `SEED:I`: world I of the family of SEED (bench:freshness-family), compressed to a 2-minute max
   * age and run whole (test/support/freshness-sim/family.ts familyE2eFlags); it sets the run's shape too.
   */
  family: { type: 'string' },
  /** Classes of wallets and their change rates (default {@link DEFAULT_CHANGES}). */
  changes: { type: 'string' },
  /** The sandbox's createDates: `random` (the control, default), `from-changes` or `predating`. */
  'created-dates': { type: 'string' },
  /** Quiet wallets that start changing (`share:rate@after`, as `mock-api --wake-up`). */
  'wake-up': { type: 'string' },
  /** What a change does (`add:…,remove:…,replace:…`, as `mock-api --change-kinds`). */
  'change-kinds': { type: 'string' },
  /** With `--change-kinds`: the cards a wallet holds, `MIN-MAX` (default 1-4). */
  'wallet-cards': { type: 'string' },
  /** `share@after`: that share of the subscribers arrive then, added by `cards-sync enqueue --file`. */
  intake: { type: 'string' },
  /** `budget:F,max-age:G@after`: then the continuous workers are restarted one by one with the budget × F and the max age × G; round robin spends the new budget too. */
  retune: { type: 'string' },
  sample: { type: 'string', default: '10s' },
  /**
   * A duration: the continuous set-up runs two workers, and the one holding the refresh's lease is
   * killed with SIGKILL this often and replaced at once (the fault suite's crash, in a world).
   */
  'kill-every': { type: 'string' },
  seed: { type: 'string', default: '7' },
  'redis-url': { type: 'string' },
} as const;

/** `--changes` when neither it nor `--world` says otherwise: 70% never, 20% 1/h, 8% 12/h, 2% 1/min. */
const DEFAULT_CHANGES = '0.7:0,0.2:1/h,0.08:12/h,0.02:1/m';

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
  /** `--change-kinds` (with `--wallet-cards`): wallets whose changes are of stated kinds. */
  wallets: WalletRules | undefined;
  /** `--intake`: this share of the subscribers become known `afterMs` after the start. */
  intake: { share: number; afterMs: number } | undefined;
  /** `--retune`: when (after the start), and the factors of the budget and the max age from then on. */
  retune: { budgetFactor: number; maxAgeFactor: number; afterMs: number } | undefined;
  /** `--kill-every`: how often the continuous set-up's lease holder is killed with SIGKILL. */
  killEveryMs: number | undefined;
  /** `--world`'s name, if one was given. */
  world: string | undefined;
  /** The flags as given, for the report's header and the workers' environment. */
  flags: {
    maxAge: string;
    sample: string;
    changes: string;
    wakeUp: string | undefined;
    changeKinds: string | undefined;
    walletCards: string | undefined;
    intake: string | undefined;
    retune: string | undefined;
    killEvery: string | undefined;
    chart: string | undefined;
    redisUrl: string | undefined;
  };
}

/** bench:freshness-e2e's flags as parseFlags gives them (declared in bench/freshness-e2e.ts). */
export interface Flags extends WorldFlags {
  world?: string;
  family?: string;
  subscribers?: string;
  minutes?: string;
  warmup?: string;
  budget?: string;
  'max-age'?: string;
  'audit-share'?: string;
  sample?: string;
  'kill-every'?: string;
  seed?: string;
  chart?: string;
  'redis-url'?: string;
}

/**
 * The flags, checked (`--world`'s first, a flag given beside it winning): a bad one exits with
 * status 2 and says why, after `context` (bench:freshness-worlds names the world).
 */
export function readSettings(given: Flags, context = ''): Settings {
  const refuse: (message: string) => never = (message) => {
    console.error(`${context}${message}`);
    process.exit(2);
  };
  if (given.world !== undefined && given.family !== undefined)
    refuse('--world and --family: give one of them');
  let family: Flags = {};
  try {
    family = given.family === undefined ? {} : familyE2eFlags(given.family);
  } catch (error) {
    refuse((error as Error).message);
  }
  // A family world sets the run's shape (its max age, six of them, figures from the start) over the defaults.
  const values: Flags = { ...worldFlags(given.world), ...definedOnly(given), ...family };
  values.changes ??= DEFAULT_CHANGES;
  values['created-dates'] ??= 'random';
  values.subscribers ??= '10000';
  values.budget ??= '150';
  const n = wholeNumber('subscribers', values.subscribers, 10);
  const minutes = wholeNumber('minutes', values.minutes, 2);
  const warmupMin = wholeNumber('warmup', values.warmup, 0);
  const budget = wholeNumber('budget', values.budget, 1);
  const maxAgeMs = durationMs(values['max-age']!);
  const sampleMs = durationMs(values.sample!);
  const auditShare = Number(values['audit-share']);
  const seed = wholeNumber('seed', values.seed, 0);
  if (!maxAgeMs || !sampleMs || !(auditShare >= 0 && auditShare < 1) || warmupMin >= minutes) {
    refuse('--max-age and --sample take durations (5m, 10s), --audit-share 0 to <1, --warmup < --minutes');
  }
  let createdDates: CreatedDates;
  let classes: ChangeClass[];
  let wakeUp: WakeUp | undefined;
  let wallets: WalletRules | undefined;
  let intake: Settings['intake'];
  let retune: Settings['retune'];
  try {
    createdDates = parseCreatedDates(values['created-dates']!);
    classes = parseChanges(values.changes!);
    wakeUp = values['wake-up'] === undefined ? undefined : parseWakeUp(values['wake-up']);
    wallets = readWallets(values);
    intake = values.intake === undefined ? undefined : parseIntake(values.intake);
    retune = values.retune === undefined ? undefined : parseRetune(values.retune);
  } catch (error) {
    refuse((error as Error).message);
  }
  const killEvery = values['kill-every'];
  const killEveryMs = killEvery === undefined ? undefined : durationMs(killEvery);
  if (
    killEvery !== undefined &&
    !(killEveryMs !== undefined && killEveryMs >= 10_000 && killEveryMs < minutes * 60_000)
  ) {
    refuse(`--kill-every takes a duration from 10s to less than the run (${minutes} min), not ${killEvery}`);
  }
  if (retune && retune.afterMs >= minutes * 60_000) {
    refuse(`--retune: the change comes after the run's end (${minutes} min); make it earlier`);
  }
  if (intake && intake.afterMs >= minutes * 60_000) {
    refuse(`--intake: the subscribers arrive after the run's end (${minutes} min); make it earlier`);
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
    wallets,
    intake,
    retune,
    killEveryMs,
    world: given.world ?? (given.family === undefined ? undefined : `family ${given.family}`),
    flags: {
      maxAge: values['max-age']!,
      sample: values.sample!,
      changes: values.changes!,
      wakeUp: values['wake-up'],
      changeKinds: values['change-kinds'],
      walletCards: values['wallet-cards'],
      intake: values.intake,
      retune: values.retune,
      killEvery,
      chart: values.chart,
      redisUrl: values['redis-url'],
    },
  };
}

/** The flags that were given: parseFlags leaves the others undefined, which must not hide a world's. */
function definedOnly(values: Flags): Flags {
  return Object.fromEntries(Object.entries(values).filter(([, v]) => v !== undefined)) as Flags;
}

/** The budget (requests a second) and the max age in force `sinceStartMs` after the start: `--retune` changes both. */
export function inForce(settings: Settings, sinceStartMs: number): { budget: number; maxAgeMs: number } {
  const r = settings.retune;
  return r && sinceStartMs >= r.afterMs
    ? { budget: settings.budget * r.budgetFactor, maxAgeMs: settings.maxAgeMs * r.maxAgeFactor }
    : { budget: settings.budget, maxAgeMs: settings.maxAgeMs };
}
