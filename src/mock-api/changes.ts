import { createHash } from 'node:crypto';

// Wallets that change over wall time (the end-to-end freshness run, docs/benchmarks.md): each subscriber belongs to a
// class with a stated change rate, and its wallet changes as a Poisson process at that rate. The
// process is drawn lazily and deterministically from the subscriber id and a seed, so two sandboxes
// given the same spec, seed and start see the same changes at the same moments, and any moment's
// truth can be asked for without replaying the others.

/** One class of `--changes`: this share of subscribers changes at this rate. */
export interface ChangeClass {
  share: number;
  /** Changes per second; 0 = never. */
  perSecond: number;
}

const PER: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 };

/**
 * `0.7:0,0.2:1/h,0.08:12/h,0.02:1/m` → classes: shares from 0 to 1 that sum to at most 1 (the rest
 * never change), each with a rate `N/unit` (s, m, h, d, w) or `0`. Throws a one-line message on
 * anything else.
 */
export function parseChanges(spec: string): ChangeClass[] {
  const classes: ChangeClass[] = [];
  for (const part of spec.split(',')) {
    const m = /^\s*(\d*\.?\d+)\s*:\s*(?:(0)|(\d*\.?\d+)\/([smhdw]))\s*$/.exec(part);
    const share = Number(m?.[1]);
    if (!m || !(share >= 0 && share <= 1)) {
      throw new Error(
        `--changes takes share:rate pairs (a share from 0 to 1, a rate like 12/h or 0; lower-case s, m, h, d, w), not ${JSON.stringify(part)}`,
      );
    }
    const perSecond = m[2] !== undefined ? 0 : Number(m[3]) / PER[m[4]!]!;
    classes.push({ share, perSecond });
  }
  const total = classes.reduce((sum, c) => sum + c.share, 0);
  if (total > 1 + 1e-9) throw new Error(`--changes: the shares sum to ${total}, more than 1`);
  return classes;
}

/** A uniform draw in [0, 1) from the parts, the same every time. */
function uniform(...parts: (string | number)[]): number {
  return createHash('sha256').update(parts.join('|')).digest().readUIntBE(0, 6) / 2 ** 48;
}

export interface WalletChanges {
  /** The subscriber's true change rate, per second (a woken wallet's from its waking on). */
  rateOf(subscriberId: number): number;
  /** How many times the subscriber's wallet has changed since the start, at `atMs`. */
  versionAt(subscriberId: number, atMs: number): number;
  /** When the change that made `version` (from 1) happened, ms; asked only of versions reached. */
  changedAt(subscriberId: number, version: number): number;
  /** Whether the wallet never changed before it woke (`--wake-up`). */
  wokenAt(subscriberId: number): number | null;
}

/** `--wake-up`: this share of the wallets that never change start changing at `perSecond`, `afterMs` from the start. */
export interface WakeUp {
  share: number;
  perSecond: number;
  afterMs: number;
}

/** `0.1:12/h@10m` → a tenth of the quiet wallets, 12 changes an hour, from 10 minutes on. */
export function parseWakeUp(spec: string): WakeUp {
  const m = /^\s*(\d*\.?\d+)\s*:\s*(\d*\.?\d+)\/([smhdw])\s*@\s*(\d*\.?\d+)([smhdw])\s*$/.exec(spec);
  const share = Number(m?.[1]);
  if (!m || !(share >= 0 && share <= 1)) {
    throw new Error(
      `--wake-up takes share:rate@after (e.g. 0.1:12/h@10m; lower-case s, m, h, d, w), not ${JSON.stringify(spec)}`,
    );
  }
  return {
    share,
    perSecond: Number(m[2]) / PER[m[3]!]!,
    afterMs: Number(m[4]) * PER[m[5]!]! * 1000,
  };
}

/**
 * Changes from `startMs` on: a subscriber's class comes from its id, its k-th change waits an
 * exponential time drawn from (seed, id, k). Keeps each subscriber's last change, so moving
 * forward costs one draw per change; moments are asked in time order (an earlier one than the
 * last asked gets the later answer), as a clock gives them.
 */
export function walletChanges(
  classes: readonly ChangeClass[],
  startMs: number,
  seed = 0,
  wakeUp?: WakeUp,
): WalletChanges {
  const state = new Map<number, { version: number; nextAt: number; times: number[] }>();
  const classRate = (id: number): number => {
    let u = uniform('class', seed, id);
    for (const c of classes) {
      u -= c.share;
      if (u < 0) return c.perSecond;
    }
    return 0;
  };
  const wokenAt = (id: number): number | null =>
    wakeUp && classRate(id) === 0 && uniform('wake', seed, id) < wakeUp.share
      ? startMs + wakeUp.afterMs
      : null;
  const rateOf = (id: number): number => (wokenAt(id) !== null ? wakeUp!.perSecond : classRate(id));
  const wait = (id: number, k: number, rate: number) =>
    rate > 0 ? (-Math.log(1 - uniform('change', seed, id, k)) / rate) * 1000 : Number.POSITIVE_INFINITY;
  return {
    rateOf,
    wokenAt,
    versionAt(id, atMs) {
      let s = state.get(id);
      if (!s) {
        s = { version: 0, nextAt: (wokenAt(id) ?? startMs) + wait(id, 0, rateOf(id)), times: [] };
        state.set(id, s);
      }
      const rate = rateOf(id);
      while (s.nextAt <= atMs) {
        s.version += 1;
        s.times.push(s.nextAt);
        s.nextAt += wait(id, s.version, rate);
      }
      return s.version;
    },
    changedAt(id, version) {
      return state.get(id)?.times[version - 1] ?? startMs;
    },
  };
}
