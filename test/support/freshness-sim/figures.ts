import {
  estimatedStaleShare,
  type Interval,
  MS_PER_DAY,
  type Observation,
  type PolicyParams,
  wilson,
} from '../../../src/freshness/index.js';
import type { Copies } from './copies.js';
import type { PolicyName, SimOptions, SimResult } from './types.js';
import type { World } from './world.js';

// What a run measures, against the world's truth: time spent stale after the warm-up, the ages of
// copies, the snapshots of the stale share (and the continuous policy's estimate of it), the
// audit's draws; and the {@link SimResult} made of them at the end.

interface Snapshot {
  at: number;
  stale: number;
  woken: number;
  wokenStale: number;
  same: number;
  sameStale: number;
  /** The continuous policy's estimate of the stale share (after the warm-up). */
  estimate?: number;
}

export class Figures {
  private readonly n: number;
  private readonly endMs: number;
  private readonly warmMs: number;
  private readonly maxAgeMs: number;
  private staleMs = 0;
  private syncs = 0;
  private largestAge = 0;
  private staleAgeSum = 0;
  private staleAgeCount = 0;
  private readonly errors = { abs: 0, truth: 0, estimate: 0, count: 0 };
  /** The audit's draws: when, how many copies each stands for, and how many of them were stale. */
  private readonly audits: { at: number; samples: number; found: number }[] = [];
  /** The audit's draws as observations (the copy's age, whether it had changed), when. */
  private readonly auditObservations: { at: number; observation: Observation }[] = [];
  /** The first of `audits` within the last max age, as {@link auditInterval} last read them. */
  private auditFrom = 0;
  /** The syncs of the plan (not the audit's draws, not first syncs): when, and whether each found a change. */
  private readonly planned: { at: number; changed: boolean }[] = [];
  private nextSnapshot = 0;
  private readonly snapshots: Snapshot[] = [];

  constructor(
    private readonly policy: PolicyName,
    private readonly o: SimOptions,
    private readonly world: World,
    private readonly copies: Copies,
  ) {
    this.n = o.subscribers;
    this.endMs = o.days * MS_PER_DAY;
    this.warmMs = o.warmupDays * MS_PER_DAY;
    this.maxAgeMs = o.maxAgeDays * MS_PER_DAY;
  }

  /** A sync at `now`, before the copy is updated: the wallet's age, and its stale time if it `changed`. */
  sync(id: number, now: number, changed: boolean, audit: false | { samples: number; found: number }) {
    this.syncs += 1;
    this.largestAge = Math.max(this.largestAge, now - this.since(id));
    if (this.copies.lastSuccessAt(id) === null) {
      // Nothing stored yet (never synced, or an intake's subscriber since it arrived): stale until
      // this first sync.
      const from = Math.max(this.world.arrivesAt[id]!, this.warmMs);
      if (now > from) this.staleMs += now - from;
    } else if (changed) {
      const from = Math.max(this.world.nextChange[id]!, this.warmMs);
      if (now > from) this.staleMs += now - from;
    }
    if (audit) this.audits.push({ at: now, ...audit });
    else if (this.copies.lastSuccessAt(id) !== null) this.planned.push({ at: now, changed });
  }

  /**
   * The plan's own syncs after `since`, the latest `atMost` of them (first syncs apart, as
   * production's count leaves them out): how many, and how many found the cards changed. Counted as
   * they are, not as a larger fleet's: a simulated sync is one observation, and counting it as many
   * would make the criterion surer than what it saw.
   */
  syncsSince(since: number, atMost = Number.POSITIVE_INFINITY): { samples: number; changed: number } {
    let from = this.planned.length;
    while (from > 0 && this.planned.length - from < atMost && this.planned[from - 1]!.at > since) from -= 1;
    let changed = 0;
    for (let k = from; k < this.planned.length; k++) if (this.planned[k]!.changed) changed += 1;
    return { samples: this.planned.length - from, changed };
  }

  /** Records the audit's draws as observations (src/freshness `observation`). */
  auditObserved(at: number, observations: readonly Observation[]): void {
    for (const observation of observations) this.auditObservations.push({ at, observation });
  }

  /** The first of `auditObservations` within the last max age, as {@link auditObservationsOf} last read them. */
  private auditObservationsFrom = 0;

  /** The audit's draws of the last max age as observations (read at times that only move on). */
  auditObservationsOf(now: number): Observation[] {
    while (
      this.auditObservationsFrom < this.auditObservations.length &&
      this.auditObservations[this.auditObservationsFrom]!.at < now - this.maxAgeMs
    )
      this.auditObservationsFrom += 1;
    return this.auditObservations.slice(this.auditObservationsFrom).map((x) => x.observation);
  }

  /** The audit as the plan reads it at `now`: the share found stale among its draws of the last max age. */
  auditInterval(now: number): (Interval & { samples: number }) | null {
    while (this.auditFrom < this.audits.length && this.audits[this.auditFrom]!.at < now - this.maxAgeMs)
      this.auditFrom += 1;
    return this.auditWindow(this.auditFrom);
  }

  /** The audit's draws after `since` (when the plan in force was made). */
  auditSince(since: number): (Interval & { samples: number }) | null {
    let from = this.audits.length;
    while (from > 0 && this.audits[from - 1]!.at > since) from -= 1;
    return this.auditWindow(from);
  }

  private auditWindow(from: number): (Interval & { samples: number }) | null {
    let samples = 0;
    let found = 0;
    for (let k = from; k < this.audits.length; k++) {
      samples += this.audits[k]!.samples;
      found += this.audits[k]!.found;
    }
    const w = wilson(found, samples);
    return w ? { ...w, samples } : null;
  }

  /** Since when the subscriber's copy has been what it is: its last sync, or its arrival while it has none. */
  private since(id: number): number {
    return this.copies.lastSuccessAt(id) ?? this.world.arrivesAt[id]!;
  }

  /**
   * Every `snapshotSeconds`: the stale share over the tick that follows (of the subscribers
   * arrived), by wallet kind, and the estimate's error at the tick's middle. Over the tick, not at
   * its start: the tick's syncs have just landed, and the next come a tick on, so each copy is stale
   * for the part of the tick after its next change. Read at the instant of the syncs, every copy
   * synced in the tick counted at age 0, where a sampler of the real fleet reads at any moment
   * between syncs; in a world whose busy wallets are synced every few ticks that put the forecast
   * a third under the real run (docs/refresh.md, the trial world).
   */
  snapshot(now: number, params: PolicyParams) {
    if (now < this.nextSnapshot) return;
    const { n, o, warmMs } = this;
    const { nextChange, trueRate, woken, arrivesAt } = this.world;
    this.nextSnapshot = now + (o.snapshotSeconds ?? 3600) * 1000;
    const tickMs = (o.tickSeconds ?? 60) * 1000;
    let stale = 0;
    let arrived = 0;
    const snap: Snapshot = { at: now, stale: 0, woken: 0, wokenStale: 0, same: 0, sameStale: 0 };
    for (let id = 0; id < n; id++) {
      if (arrivesAt[id]! > now) continue;
      arrived += 1;
      const staleFor =
        this.copies.lastSuccessAt(id) === null
          ? 1
          : Math.min(1, Math.max(0, (now + tickMs - nextChange[id]!) / tickMs));
      if (woken[id]) {
        snap.woken += 1;
        snap.wokenStale += staleFor;
      } else if (o.wakeUp && trueRate[id] === o.wakeUp.ratePerDay) {
        snap.same += 1;
        snap.sameStale += staleFor;
      }
      stale += staleFor;
      if (staleFor > 0 && now >= warmMs) {
        this.staleAgeSum += staleFor * (now - this.since(id));
        this.staleAgeCount += staleFor;
      }
    }
    snap.stale = stale / arrived;
    this.snapshots.push(snap);
    if (this.policy === 'continuous' && now >= warmMs) {
      const estimate = estimatedStaleShare(this.copies.all(), now + tickMs / 2, params.prior);
      snap.estimate = estimate;
      this.errors.abs += Math.abs(estimate - stale / arrived);
      this.errors.truth += stale / arrived;
      this.errors.estimate += estimate;
      this.errors.count += 1;
    }
  }

  /** The run's figures, once its clock reached the end. */
  result(params: PolicyParams, keepsMaxAge: boolean): SimResult {
    const { policy, n, o, endMs, warmMs, maxAgeMs, snapshots, errors } = this;
    const { nextChange, arrivesAt } = this.world;
    let truthAtEnd = 0;
    let arrived = 0;
    // Subscriber-time counted: everyone's from the warm-up, an intake's from its arrival.
    let exposure = 0;
    for (let id = 0; id < n; id++) {
      if (arrivesAt[id]! >= endMs) continue;
      arrived += 1;
      exposure += endMs - Math.max(arrivesAt[id]!, warmMs);
      this.largestAge = Math.max(this.largestAge, endMs - this.since(id));
      if (this.copies.lastSuccessAt(id) === null) {
        this.staleMs += endMs - Math.max(arrivesAt[id]!, warmMs);
        truthAtEnd += 1;
      } else if (nextChange[id]! < endMs) {
        this.staleMs += endMs - Math.max(nextChange[id]!, warmMs);
        truthAtEnd += 1;
      }
    }
    const result: SimResult = {
      policy,
      // Without an intake, the same product as before, so earlier figures repeat to the last digit.
      staleShare: this.staleMs / (o.intake ? exposure : n * (endMs - warmMs)),
      meanStaleAgeDays: this.staleAgeCount === 0 ? 0 : this.staleAgeSum / this.staleAgeCount / MS_PER_DAY,
      maxAgeDays: this.largestAge / MS_PER_DAY,
      syncs: this.syncs,
      windows: [0, 1, 2].map((k) => {
        const start = (o.windowsFromDays ?? 0) * MS_PER_DAY;
        const from = start + (k * (endMs - start)) / 3;
        const to = start + ((k + 1) * (endMs - start)) / 3;
        const inside = snapshots.filter((x) => x.at >= from && x.at < to);
        const estimates = inside.flatMap((x) => (x.estimate === undefined ? [] : [x.estimate]));
        return {
          fromDays: from / MS_PER_DAY,
          toDays: to / MS_PER_DAY,
          staleShare: inside.reduce((sum, x) => sum + x.stale, 0) / Math.max(1, inside.length),
          ...(estimates.length > 0
            ? { estimate: estimates.reduce((sum, x) => sum + x, 0) / estimates.length }
            : {}),
        };
      }),
    };
    if (o.wakeUp) {
      const wakeMs = o.wakeUp.atDays * MS_PER_DAY;
      const after = snapshots.filter((x) => x.at >= wakeMs && x.woken > 0);
      const byMaxAge: number[] = [];
      for (let k = 0; wakeMs + k * maxAgeMs < endMs; k++) {
        const inside = after.filter(
          (x) => x.at >= wakeMs + k * maxAgeMs && x.at < wakeMs + (k + 1) * maxAgeMs,
        );
        byMaxAge.push(
          inside.reduce((sum, x) => sum + x.wokenStale / x.woken, 0) / Math.max(1, inside.length),
        );
      }
      const same = after.filter((x) => x.same > 0);
      result.wakeUp = {
        woken: after[0]?.woken ?? 0,
        byMaxAge,
        steadyState: same.reduce((sum, x) => sum + x.sameStale / x.same, 0) / Math.max(1, same.length),
      };
    }
    if (policy === 'continuous' || policy === 'oracle') result.keepsMaxAge = keepsMaxAge;
    if (policy === 'continuous') {
      result.estimateError = {
        meanAbs: errors.abs / errors.count,
        meanTruth: errors.truth / errors.count,
        meanEstimate: errors.estimate / errors.count,
      };
      // The audit as `status` reads it: the samples of the last max age.
      const recent = this.audits.filter((x) => x.at >= endMs - maxAgeMs);
      const samples = recent.reduce((sum, x) => sum + x.samples, 0);
      const w = wilson(
        recent.reduce((sum, x) => sum + x.found, 0),
        samples,
      );
      if (w) {
        result.audit = {
          samples,
          ...w,
          truthAtEnd: truthAtEnd / arrived,
          estimateAtEnd: estimatedStaleShare(this.copies.all(), endMs, params.prior),
        };
      }
    }
    return result;
  }
}
