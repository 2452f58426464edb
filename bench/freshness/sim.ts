import {
  afterClaim,
  afterSuccess,
  allowance,
  type EvidenceSample,
  estimatedStaleShare,
  FORGET_MAX_AGES,
  fitGroupedMixture,
  groupRates,
  intervalDays,
  MS_PER_DAY,
  type Observation,
  PLANNED_SHARE,
  type PolicyParams,
  PRIOR_WEIGHT,
  pooledRate,
  solveThreshold,
  splitForAudit,
  wilson,
} from '../../src/freshness/index.js';

// A virtual-clock simulator of the refresh: subscribers whose cards change as Poisson processes
// at stated rates, a request budget, and a policy that decides whom to sync when. The continuous
// policy is the product's own code (src/freshness/): the estimator, the threshold, the due times,
// the token bucket and the audit split; the earliest-due-first choice that Postgres makes with
// its index is a heap here. Nothing sleeps: a 30-day run takes seconds.

export interface RateClass {
  label: string;
  share: number;
  /** True changes per day; 0 = never. */
  ratePerDay: number;
}

export interface SimOptions {
  subscribers: number;
  classes: readonly RateClass[];
  /** Syncs a day the refresh may spend. */
  budgetPerDay: number;
  days: number;
  /** Days before figures are taken (learning). */
  warmupDays: number;
  maxAgeDays: number;
  auditShare: number;
  seed: number;
  /** Simulated seconds between two ticks of the scheduler. Default 60. */
  tickSeconds?: number;
  /** Simulated seconds between two plans (production: 10 min, or a fifth of the max age). Default 3600. */
  replanSeconds?: number;
  /** Simulated seconds between two snapshots of the estimate and the truth. Default 3600. */
  snapshotSeconds?: number;
  priorWeight?: number;
  /** false: the single-rate prior only (the estimator before the mixture), for comparison. */
  mixture?: boolean;
  /**
   * The cards' createDates (issue 36). `random`: years old, unrelated to change (today's sandbox,
   * the control). `from-changes`: a change that adds a card (3 in 8) stamps it with the change's
   * time, and a wallet's first cards carry dates drawn from the same process before the start.
   */
  createdDates?: 'random' | 'from-changes';
  /** false: the policy ignores the answers' evidence (one prior for everyone), for comparison. */
  evidence?: boolean;
  /** τ of forgetting in max ages; 0: never forget. Default the product's (FORGET_MAX_AGES). */
  forgetMaxAges?: number;
  /** The estimator's change-point hazard (src/freshness/change-point.ts); absent: the product's. */
  changePointHazard?: number;
  /** Plan due times from a rate drawn from each posterior (Thompson sampling), seeded. */
  explore?: boolean;
  /** Where the three windows of {@link SimResult.windows} start, days. Default 0 (thirds of the run). */
  windowsFromDays?: number;
  /** At `atDays`, this share of the wallets that never changed start changing at `ratePerDay`. */
  wakeUp?: { share: number; ratePerDay: number; atDays: number };
}

/** The share of changes that add a card (the sandbox: 1 to 4 cards drawn afresh at each change). */
export const ADD_SHARE = 3 / 8;

/** A window of the run and its time-averaged stale share (hourly snapshots). */
export interface WindowShare {
  fromDays: number;
  toDays: number;
  staleShare: number;
}

export type PolicyName = 'nightly-id-order' | 'round-robin' | 'continuous' | 'oracle' | 'nightly-by-estimate';

export interface SimResult {
  policy: PolicyName;
  /** Time-averaged share of subscribers whose copy differs from upstream (after warm-up). */
  staleShare: number;
  /** Mean age of stale copies, days (hourly snapshots after warm-up). */
  meanStaleAgeDays: number;
  /** Longest time any subscriber went without a sync, days. */
  maxAgeDays: number;
  syncs: number;
  /** Mean |estimate − truth| in share points, and the mean truth, for the continuous policy. */
  estimateError?: { meanAbs: number; meanTruth: number; meanEstimate: number };
  /** The audit's last 95% interval and the truth at the end. */
  audit?: {
    samples: number;
    ratio: number;
    low: number;
    high: number;
    truthAtEnd: number;
    estimateAtEnd: number;
  };
  keepsMaxAge?: boolean;
  /** The run from `windowsFromDays` in thirds: learning, middle, end. */
  windows: WindowShare[];
  /** With `wakeUp`: the woken wallets' stale share by max age after waking, and the always-busy wallets' at the same rate. */
  wakeUp?: { woken: number; byMaxAge: number[]; steadyState: number };
}

/** mulberry32: a small seeded generator, so runs repeat. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A binary min-heap of (due, id) with lazy deletion by version. */
class DueHeap {
  private due: number[] = [];
  private ids: number[] = [];
  private versions: number[] = [];
  constructor(private current: Int32Array) {}
  get size() {
    return this.ids.length;
  }
  push(due: number, id: number) {
    this.current[id]! += 1;
    this.due.push(due);
    this.ids.push(id);
    this.versions.push(this.current[id]!);
    let i = this.ids.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (this.due[p]! <= this.due[i]!) break;
      this.swap(i, p);
      i = p;
    }
  }
  /** The earliest live entry, removed. */
  pop(): number | undefined {
    while (this.ids.length > 0) {
      const id = this.ids[0]!;
      const version = this.versions[0]!;
      const last = this.ids.length - 1;
      this.swap(0, last);
      this.due.pop();
      this.ids.pop();
      this.versions.pop();
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < this.ids.length && this.due[l]! < this.due[m]!) m = l;
        if (r < this.ids.length && this.due[r]! < this.due[m]!) m = r;
        if (m === i) break;
        this.swap(i, m);
        i = m;
      }
      if (version === this.current[id]) return id;
    }
    return undefined;
  }
  private swap(a: number, b: number) {
    [this.due[a], this.due[b]] = [this.due[b]!, this.due[a]!];
    [this.ids[a], this.ids[b]] = [this.ids[b]!, this.ids[a]!];
    [this.versions[a], this.versions[b]] = [this.versions[b]!, this.versions[a]!];
  }
}

/** Runs one policy over the population; the population and its changes repeat for a given seed. */
export function simulate(policy: PolicyName, o: SimOptions): SimResult {
  const n = o.subscribers;
  const random = rng(o.seed);
  const changes = rng(o.seed ^ 0x9e3779b9);
  const draws = rng(o.seed ^ 0x2545f491);
  const tickMs = (o.tickSeconds ?? 60) * 1000;
  const endMs = o.days * MS_PER_DAY;
  const warmMs = o.warmupDays * MS_PER_DAY;
  const maxAgeMs = o.maxAgeDays * MS_PER_DAY;

  // The population: classes in shuffled order over the ids, so id order says nothing.
  const trueRate = new Float64Array(n);
  {
    let id = 0;
    for (const c of o.classes) {
      const count = Math.round(c.share * n);
      for (let k = 0; k < count && id < n; k++) trueRate[id++] = c.ratePerDay;
    }
    for (let i = n - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [trueRate[i], trueRate[j]] = [trueRate[j]!, trueRate[i]!];
    }
  }
  const nextChange = new Float64Array(n);
  const drawChange = (id: number, from: number) => {
    const rate = trueRate[id]!;
    nextChange[id] =
      rate > 0 ? from + (-Math.log(1 - changes()) / rate) * MS_PER_DAY : Number.POSITIVE_INFINITY;
  };
  // The newest card's createDate, and the one the service last saw (its answer's).
  const fromChanges = o.createdDates === 'from-changes';
  const cards = rng(o.seed ^ 0x5bd1e995);
  const newestCreated = new Float64Array(n);
  for (let id = 0; id < n; id++) {
    const years = (1 + 5 * cards()) * 365 * MS_PER_DAY;
    const rate = trueRate[id]! * ADD_SHARE;
    newestCreated[id] =
      fromChanges && rate > 0 ? Math.max(-years, (Math.log(1 - cards()) / rate) * MS_PER_DAY) : -years;
  }
  const seenNewest = Float64Array.from(newestCreated);
  const useEvidence = o.evidence !== false;
  const evidenceAt = (id: number, now: number) =>
    useEvidence ? { newestCardAgeDays: (now - seenNewest[id]!) / MS_PER_DAY, cards: 1 } : null;
  const forgetDays = o.maxAgeDays * (o.forgetMaxAges ?? FORGET_MAX_AGES);
  const woken = new Uint8Array(n);
  // Everyone was loaded once at time 0 (a first sync): no observation yet.
  const lastSync = new Float64Array(n);
  const rate: (number | null)[] = new Array(n).fill(null);
  const observations: (Observation[] | null)[] = new Array(n).fill(null);
  for (let id = 0; id < n; id++) drawChange(id, 0);

  let staleMs = 0;
  let syncs = 0;
  let largestAge = 0;
  let staleAgeSum = 0;
  let staleAgeCount = 0;
  const errors = { abs: 0, truth: 0, estimate: 0, count: 0 };
  const audits: { at: number; changed: boolean }[] = [];

  const base = { maxAgeDays: o.maxAgeDays, minIntervalDays: 0 };
  const budgetShare = policy === 'continuous' ? 1 - o.auditShare : 1;
  let params: PolicyParams = {
    ...base,
    thresholdDays: Number.POSITIVE_INFINITY,
    prior: { ratePerDay: 1 / o.maxAgeDays, weight: o.priorWeight ?? PRIOR_WEIGHT, forgetDays },
  };
  let keepsMaxAge = true;
  let planAt = 0;
  const replan = () => {
    // Round robin and the nightly sweep in id order read no plan.
    if (policy === 'round-robin' || policy === 'nightly-id-order') return;
    if (policy === 'oracle') {
      const t = solveThreshold(groupRates(trueRate), o.budgetPerDay, base);
      params = { ...params, thresholdDays: t.thresholdDays };
      keepsMaxAge &&= t.keepsMaxAge;
      return;
    }
    // As production does: the prior from a sample of observations, the threshold from the rates.
    const sample: (Observation[] | null)[] = [];
    const withEvidence: EvidenceSample[] = [];
    for (let k = 0; k < Math.min(n, 20_000); k++) {
      const id = Math.floor(random() * n);
      sample.push(observations[id]!);
      withEvidence.push({ observations: observations[id]!, evidence: evidenceAt(id, planAt) });
    }
    const pooled = pooledRate(sample, 1 / o.maxAgeDays);
    const prior = {
      ratePerDay: pooled,
      weight: o.priorWeight ?? PRIOR_WEIGHT,
      forgetDays,
      ...(o.changePointHazard !== undefined ? { changePointHazard: o.changePointHazard } : {}),
      mixture: o.mixture === false ? null : fitGroupedMixture(withEvidence, pooled, forgetDays),
    };
    const rates = rate.map((r) => r ?? prior.ratePerDay);
    const t = solveThreshold(groupRates(rates), o.budgetPerDay * budgetShare * PLANNED_SHARE, base);
    params = { ...base, thresholdDays: t.thresholdDays, prior };
    keepsMaxAge &&= t.keepsMaxAge;
  };

  const version = new Int32Array(n);
  const heap = new DueHeap(version);
  const dueOf = (id: number, now: number) =>
    policy === 'oracle' ? now + intervalDays(trueRate[id]!, params) * MS_PER_DAY : now;

  const sync = (id: number, now: number, audit = false) => {
    syncs += 1;
    largestAge = Math.max(largestAge, now - lastSync[id]!);
    const changed = nextChange[id]! <= now;
    if (changed) {
      const from = Math.max(nextChange[id]!, warmMs);
      if (now > from) staleMs += now - from;
      // The changes since the last sync, each adding a card with ADD_SHARE; the newest stamps it.
      if (fromChanges) {
        const rate = trueRate[id]! * MS_PER_DAY ** -1;
        for (let at = nextChange[id]!; at <= now; at += -Math.log(1 - cards()) / rate) {
          if (cards() < ADD_SHARE) newestCreated[id] = at;
        }
      }
      drawChange(id, now);
    }
    seenNewest[id] = newestCreated[id]!;
    if (audit) audits.push({ at: now, changed });
    const update = afterSuccess(
      {
        lastSuccessAt: lastSync[id]!,
        observations: observations[id]!,
        ratePerDay: rate[id]!,
        evidence: evidenceAt(id, now),
      },
      changed,
      now,
      params,
      o.explore ? draws() : undefined,
    );
    observations[id] = update.observations;
    rate[id] = update.ratePerDay;
    lastSync[id] = now;
    if (policy === 'continuous' || policy === 'nightly-by-estimate') heap.push(update.nextRefreshAt, id);
    else if (policy === 'oracle') heap.push(dueOf(id, now), id);
  };

  replan();
  if (policy === 'continuous' || policy === 'nightly-by-estimate' || policy === 'oracle') {
    // The oracle's first due times are spread over each interval, or they all fall due at once.
    for (let id = 0; id < n; id++) heap.push(policy === 'oracle' ? dueOf(id, 0) * random() : 0, id);
  }

  let markedAt: number | null = null;
  let carry = 0;
  let cursor = 0;
  let sweeping = false;
  let sweepOrder: number[] = [];
  const perSecond = o.budgetPerDay / 86_400;
  let nextReplan = 0;
  let nextSnapshot = 0;
  const snapshots: {
    at: number;
    stale: number;
    woken: number;
    wokenStale: number;
    same: number;
    sameStale: number;
  }[] = [];
  for (let now = 0; now < endMs; now += tickMs) {
    if (o.wakeUp && now >= o.wakeUp.atDays * MS_PER_DAY && now < o.wakeUp.atDays * MS_PER_DAY + tickMs) {
      // Quiet wallets wake: the oracle knows at once, the others learn it from their syncs.
      for (let id = 0; id < n; id++) {
        if (trueRate[id] === 0 && random() < o.wakeUp.share) {
          trueRate[id] = o.wakeUp.ratePerDay;
          woken[id] = 1;
          drawChange(id, now);
          if (policy === 'oracle') {
            heap.push(now + intervalDays(o.wakeUp.ratePerDay, params) * MS_PER_DAY * random(), id);
          }
        }
      }
      if (policy === 'oracle') nextReplan = now;
    }
    if (now >= nextReplan) {
      planAt = now;
      replan();
      nextReplan = now + (o.replanSeconds ?? 3600) * 1000;
    }
    const a = allowance(markedAt, now, perSecond, 2 + tickMs / 1000);
    markedAt = a.markedAt;
    let count = a.count;
    if (policy === 'round-robin') {
      for (; count > 0; count--) {
        sync(cursor, now);
        cursor = (cursor + 1) % n;
      }
    } else if (policy === 'nightly-id-order' || policy === 'nightly-by-estimate') {
      // The cron fires at 02:00; a sweep still going then carries on, as a run in progress does.
      const dayMs = now % MS_PER_DAY;
      if (!sweeping && dayMs >= 2 * 3_600_000 && dayMs < 2 * 3_600_000 + tickMs) {
        sweeping = true;
        cursor = 0;
        if (policy === 'nightly-by-estimate') {
          sweepOrder = [];
          for (let id = heap.pop(); id !== undefined; id = heap.pop()) sweepOrder.push(id);
        }
      }
      for (; sweeping && count > 0; count--) {
        const id = policy === 'nightly-id-order' ? cursor : sweepOrder[cursor]!;
        sync(id, now);
        cursor += 1;
        if (cursor >= n) sweeping = false;
      }
    } else {
      const split =
        policy === 'continuous'
          ? splitForAudit(count, o.auditShare, carry)
          : { scheduled: count, audit: 0, carry: 0 };
      carry = split.carry;
      for (let k = 0; k < split.scheduled; k++) {
        const id = heap.pop();
        if (id === undefined) break;
        afterClaim(
          { lastSuccessAt: lastSync[id]!, observations: observations[id]!, ratePerDay: rate[id]! },
          now,
          params,
        );
        sync(id, now);
      }
      for (let k = 0; k < split.audit; k++) sync(Math.floor(random() * n), now, true);
    }
    if (now >= nextSnapshot) {
      nextSnapshot = now + (o.snapshotSeconds ?? 3600) * 1000;
      let stale = 0;
      const snap = { at: now, stale: 0, woken: 0, wokenStale: 0, same: 0, sameStale: 0 };
      for (let id = 0; id < n; id++) {
        const isStale = nextChange[id]! <= now;
        if (woken[id]) {
          snap.woken += 1;
          if (isStale) snap.wokenStale += 1;
        } else if (o.wakeUp && trueRate[id] === o.wakeUp.ratePerDay) {
          snap.same += 1;
          if (isStale) snap.sameStale += 1;
        }
        if (isStale && now >= warmMs) {
          stale += 1;
          staleAgeSum += now - lastSync[id]!;
          staleAgeCount += 1;
        } else if (isStale) stale += 1;
      }
      snap.stale = stale / n;
      snapshots.push(snap);
      if (policy === 'continuous' && now >= warmMs) {
        const estimate = estimatedStaleShare(copies(), now, params.prior.ratePerDay);
        errors.abs += Math.abs(estimate - stale / n);
        errors.truth += stale / n;
        errors.estimate += estimate;
        errors.count += 1;
      }
    }
  }
  function* copies() {
    for (let id = 0; id < n; id++) yield { ratePerDay: rate[id]!, lastSuccessAt: lastSync[id]! };
  }
  let truthAtEnd = 0;
  for (let id = 0; id < n; id++) {
    largestAge = Math.max(largestAge, endMs - lastSync[id]!);
    if (nextChange[id]! < endMs) {
      staleMs += endMs - Math.max(nextChange[id]!, warmMs);
      truthAtEnd += 1;
    }
  }
  const result: SimResult = {
    policy,
    staleShare: staleMs / (n * (endMs - warmMs)),
    meanStaleAgeDays: staleAgeCount === 0 ? 0 : staleAgeSum / staleAgeCount / MS_PER_DAY,
    maxAgeDays: largestAge / MS_PER_DAY,
    syncs,
    windows: [0, 1, 2].map((k) => {
      const start = (o.windowsFromDays ?? 0) * MS_PER_DAY;
      const from = start + (k * (endMs - start)) / 3;
      const to = start + ((k + 1) * (endMs - start)) / 3;
      const inside = snapshots.filter((x) => x.at >= from && x.at < to);
      return {
        fromDays: from / MS_PER_DAY,
        toDays: to / MS_PER_DAY,
        staleShare: inside.reduce((sum, x) => sum + x.stale, 0) / Math.max(1, inside.length),
      };
    }),
  };
  if (o.wakeUp) {
    const wakeMs = o.wakeUp.atDays * MS_PER_DAY;
    const after = snapshots.filter((x) => x.at >= wakeMs && x.woken > 0);
    const byMaxAge: number[] = [];
    for (let k = 0; wakeMs + k * maxAgeMs < endMs; k++) {
      const inside = after.filter((x) => x.at >= wakeMs + k * maxAgeMs && x.at < wakeMs + (k + 1) * maxAgeMs);
      byMaxAge.push(inside.reduce((sum, x) => sum + x.wokenStale / x.woken, 0) / Math.max(1, inside.length));
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
    const recent = audits.filter((x) => x.at >= endMs - maxAgeMs);
    const w = wilson(recent.filter((x) => x.changed).length, recent.length);
    if (w) {
      result.audit = {
        samples: recent.length,
        ...w,
        truthAtEnd: truthAtEnd / n,
        estimateAtEnd: estimatedStaleShare(copies(), endMs, params.prior.ratePerDay),
      };
    }
  }
  return result;
}
