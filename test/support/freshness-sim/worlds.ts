import { parseChangeKinds, parseWalletCards } from '../../../src/mock-api/parse.js';
import type { WalletRules } from '../../../src/mock-api/wallets.js';
import { durationMs } from '../../../src/shared/index.js';
import type { SimOptions } from './types.js';

// The worlds the freshness benchmarks run in, by short name: each is a set of the world flags
// that bench:freshness (the simulator) and bench:freshness-e2e (real workers against the sandbox)
// both take, so that the forecast and the real run model the same world. `--world NAME` sets them;
// a flag given beside it wins. bench:freshness-worlds runs them in turn.

/** The flags that shape a world, as given on the command line. */
export interface WorldFlags {
  /** The fleet, where the world has a scale of its own (bench:freshness-e2e's default otherwise). */
  subscribers?: string;
  /** Requests a second, where the world has a scale of its own. */
  budget?: string;
  /** Classes of wallets and their change rates (`share:rate,…`). */
  changes?: string;
  'created-dates'?: string;
  'wake-up'?: string;
  /** What a change does (`add:…,remove:…,replace:…`; src/mock-api/wallets.ts). */
  'change-kinds'?: string;
  /** With `--change-kinds`: cards a wallet holds, `MIN-MAX`. */
  'wallet-cards'?: string;
  /** `share@after`: that share of the subscribers become known that long after the start. */
  intake?: string;
  /** `budget:F,max-age:G@after`: the workers restarted then with the budget × F and the max age × G. */
  retune?: string;
}

export interface WorldSpec {
  /** One line for the table and `--help`. */
  about: string;
  flags: WorldFlags;
}

/** The worlds, in the order bench:freshness-worlds runs them. */
export const WORLDS: Readonly<Record<string, WorldSpec>> = {
  control: { about: "createDates unrelated to change (the benchmarks' default)", flags: {} },
  createdate: {
    about: 'createDates are each wallet’s own history of additions',
    flags: { 'created-dates': 'from-changes' },
  },
  'wake-up': {
    about: 'createdate, and a tenth of the quiet wallets start changing 12/h at minute 10',
    flags: { 'created-dates': 'from-changes', 'wake-up': '0.1:12/h@10m' },
  },
  busy: {
    about: 'createdate with another class mix: half the wallets change, 5% every minute',
    flags: { 'created-dates': 'from-changes', changes: '0.5:0,0.3:1/h,0.15:12/h,0.05:1/m' },
  },
  spread: {
    about: 'createdate with rates spread over six classes, from 2 a day to 2 a minute',
    flags: { 'created-dates': 'from-changes', changes: '0.5:0,0.2:2/d,0.15:1/h,0.1:6/h,0.04:30/h,0.01:2/m' },
  },
  'old-cards': {
    about: 'the cards held at the start predate the service by 2–6 years; added ones are dated',
    flags: { 'created-dates': 'predating' },
  },
  'small-wallets': {
    about:
      'createdate in wallets of 1–5 cards: half the changes add a card, a quarter remove one, a quarter reissue one',
    flags: {
      'created-dates': 'from-changes',
      'change-kinds': 'add:0.5,remove:0.25,replace:0.25',
      'wallet-cards': '1-5',
    },
  },
  'not-additions': {
    about: 'createdate where 9 changes in 10 are removals or reissues, which leave the dates as they were',
    flags: {
      'created-dates': 'from-changes',
      'change-kinds': 'add:0.1,remove:0.3,replace:0.6',
      'wallet-cards': '1-5',
    },
  },
  intake: {
    about:
      'control, and 20% of the subscribers arrive at minute 7 (or --intake-at), enqueued as an operator does',
    flags: { intake: '0.2@7m' },
  },
  retune: {
    about:
      'control, and at minute 10 the operator restarts the workers with half the budget and twice the max age',
    flags: { retune: 'budget:0.5,max-age:2@10m' },
  },
  trial: {
    about:
      "a new operator's first fleet, compressed 24× in time: 1,200 subscribers, 37.5 syncs each per max age, 30% of the wallets changing 24 times per max age (12/h at a 2-hour max age)",
    flags: { subscribers: '1200', budget: '150', changes: '0.7:0,0.3:288/h' },
  },
};

/** The world flags of `name`, or a one-line refusal (exit 2) naming the worlds there are. */
export function worldFlags(name: string | undefined): WorldFlags {
  if (name === undefined) return {};
  const spec = WORLDS[name];
  if (!spec) {
    console.error(`--world takes one of ${Object.keys(WORLDS).join(', ')}, not ${JSON.stringify(name)}`);
    process.exit(2);
  }
  return spec.flags;
}

/** `0.2@7m` → a fifth of the subscribers, 7 minutes after the start; throws a one-line message on anything else. */
export function parseIntake(spec: string): { share: number; afterMs: number } {
  const m = /^\s*(\d*\.?\d+)\s*@\s*(\S+)\s*$/.exec(spec);
  const share = Number(m?.[1]);
  const afterMs = m ? durationMs(m[2]!) : undefined;
  if (!m || !(share > 0 && share < 1) || afterMs === undefined) {
    throw new Error(
      `--intake takes share@after, a share above 0 and below 1 and a duration (e.g. 0.2@7m; lower-case s, m, h, d, w), not ${JSON.stringify(spec)}`,
    );
  }
  return { share, afterMs };
}

/**
 * `budget:0.5,max-age:2@10m` → at 10 minutes, half the budget and twice the max age (either
 * factor may be left out, meaning 1); throws a one-line message on anything else.
 */
export function parseRetune(spec: string): { budgetFactor: number; maxAgeFactor: number; afterMs: number } {
  const refuse = (): never => {
    throw new Error(
      `--retune takes budget:F,max-age:G@after, factors above 0 (either may be left out) and a duration (e.g. budget:0.5,max-age:2@10m), not ${JSON.stringify(spec)}`,
    );
  };
  const [parts, after, ...rest] = spec.split('@');
  const afterMs = after === undefined ? undefined : durationMs(after);
  if (parts === undefined || afterMs === undefined || rest.length > 0) return refuse();
  const factors = new Map<string, number>();
  for (const part of parts.split(',')) {
    const m = /^\s*(budget|max-age)\s*:\s*(\d*\.?\d+)\s*$/.exec(part);
    const factor = Number(m?.[2]);
    if (!m || !(factor > 0) || factors.has(m[1]!)) return refuse();
    factors.set(m[1]!, factor);
  }
  return { budgetFactor: factors.get('budget') ?? 1, maxAgeFactor: factors.get('max-age') ?? 1, afterMs };
}

/**
 * A parsed `--retune` as the simulator takes it (SimOptions.retune), with the cadences the refresh
 * follows at the new max age, where the caller models them.
 */
export function simRetune(
  retune: { budgetFactor: number; maxAgeFactor: number; afterMs: number },
  cadences: { replanSeconds?: number; workerPlanSeconds?: number } = {},
): NonNullable<SimOptions['retune']> {
  return {
    atDays: retune.afterMs / 86_400_000,
    budgetFactor: retune.budgetFactor,
    maxAgeFactor: retune.maxAgeFactor,
    ...cadences,
  };
}

/**
 * `--change-kinds` and `--wallet-cards` (1-4 without it, as the default wallets hold); throws a
 * one-line message when `--wallet-cards` comes alone, which would change nothing.
 */
export function readWallets(values: WorldFlags): WalletRules | undefined {
  if (values['change-kinds'] === undefined) {
    if (values['wallet-cards'] !== undefined) {
      throw new Error(
        '--wallet-cards needs --change-kinds (the default wallets draw 1 to 4 cards at each change)',
      );
    }
    return undefined;
  }
  return {
    ...parseWalletCards(values['wallet-cards'] ?? '1-4'),
    kinds: parseChangeKinds(values['change-kinds']),
  };
}
