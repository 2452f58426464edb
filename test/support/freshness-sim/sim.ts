import {
  AUDIT_CHECK_SECONDS,
  AUDIT_DRAW_SPAN_MAX_AGES,
  afterClaim,
  afterSuccess,
  aheadWindow,
  allowance,
  auditAction,
  auditJudgedFrom,
  chooseAhead,
  claimLeaseMs,
  type Expectation,
  estimatedStaleShare,
  expectationSince,
  intervalDays,
  MS_PER_DAY,
  type Observation,
  observation,
  PLANS_SYNCS_READ,
  type PolicyParams,
  type Population,
  plansSyncsFrom,
  pullIn,
  splitForAudit,
  staleRateOf,
  syncsDisagree,
} from '../../../src/freshness/index.js';
import { type Copies, createCopies } from './copies.js';
import { DueHeap } from './due-heap.js';
import { Figures } from './figures.js';
import { createPlan } from './plan.js';
import { mulberry32 as rng } from './rng.js';
import type { PolicyName, SimOptions, SimResult } from './types.js';
import { createWorld, type World } from './world.js';

// A virtual-clock simulator of the refresh: subscribers whose cards change as Poisson processes
// at stated rates, a request budget, and a policy that decides whom to sync when. The continuous
// policy is the product's own code (src/freshness/): the estimator, the threshold, the due times,
// the token bucket and the audit split; the earliest-due-first choice that Postgres makes with
// its index is a heap here. Nothing sleeps: a 30-day run takes seconds.
//
// This file holds the clock: each tick's budget spent as the policy chooses, and the syncs. The
// world it syncs against is world.ts, the plan plan.ts, what it measures figures.ts; the options
// and results are in types.ts (all beside it, in test/support/freshness-sim/).

/** What the simulated refresh does as the real one does, beside the world of {@link SimOptions}. */
export interface RealRun {
  /**
   * Every subscriber known and never synced at the start (bench:freshness-e2e's start), so that a
   * first sync observes nothing; otherwise everyone was loaded once at time 0.
   */
  neverSynced?: boolean;
  /**
   * How often the workers read the shared plan, seconds (db/refresh/policy.ts `policyCache`): a
   * sync plans its next due time by the plan its worker read last, up to this old, and by none
   * (everyone at the max age) until its first read after the first plan. Absent: every sync
   * plans by the newest plan, as if the workers read it at once.
   */
  workerPlanSeconds?: number;
  /** Told of every sync, for an analysis of where the budget went (the true rate is the world's). */
  onSync?: (sync: { id: number; at: number; ratePerDay: number; changed: boolean; audit: boolean }) => void;
  /** Told of every claim of the refresh: the subscriber, the due time it was taken at, and when. */
  onClaim?: (claim: { id: number; dueAt: number; at: number }) => void;
  /** Told after each tick of the time, the parameters the policy planned by, and the copies. */
  onTick?: (now: number, params: PolicyParams, copies: Copies, world: World) => void;
}

/** Runs one policy over the population; the population and its changes repeat for a given seed. */
export function simulate(policy: PolicyName, given: SimOptions & RealRun): SimResult {
  // A copy: a retune changes its budget, max age and cadences in place, and the plan reads them.
  const o = { ...given };
  const n = o.subscribers;
  const random = rng(o.seed);
  const changes = rng(o.seed ^ 0x9e3779b9);
  const draws = rng(o.seed ^ 0x2545f491);
  const cards = rng(o.seed ^ 0x5bd1e995);
  const tickMs = (o.tickSeconds ?? 60) * 1000;
  const endMs = o.days * MS_PER_DAY;

  const world = createWorld(o, { random, changes, cards });
  const copies = createCopies(o, world.newestCreated, o.neverSynced);
  const { lastSync, rate, observations, seenNewest } = copies;
  // The plan acts on the audit as production's does (jobs/refresh/policy.ts): the estimate against
  // the audit's draws of the last max age (since the plans in force began to expect what they
  // expect: src/freshness `auditJudgedFrom`) and of those since the plan in force was made, which the
  // refresh also reads between plans (jobs/refresh/continuous.ts). The class learner, a bound, is
  // given the true mixture.
  const auditWeight = o.auditWeight ?? 1;
  let planMadeAt: number | null = null;
  let planEstimate: number | null = null;
  const judge =
    policy === 'continuous' && !o.classPrior
      ? (at: number, population: Population) => {
          // The copies as the last tick's syncs left them, at that tick's time: the moment the audit
          // drew at. Read a tick later, every copy synced in it has aged a tick it was not given
          // (production syncs continuously), which doubled the estimate of wallets synced every few
          // ticks and sent the plan round in turn on a disagreement of the simulator's own making.
          planEstimate = estimatedStaleShare(copies.all(), Math.max(0, at - tickMs), population);
          return auditAction(planEstimate, {
            lastMaxAge:
              planMadeAt === null
                ? figures.auditInterval(at)
                : figures.auditSince(auditJudgedFrom(expectation.since, at, o.maxAgeDays * MS_PER_DAY)),
            sincePlan: planMadeAt === null ? null : figures.auditSince(planMadeAt),
            plansSyncs: plansSyncs(at),
          });
        }
      : undefined;
  // The plan's own syncs since its expectation held (src/freshness `plansSyncsFrom`), the latest of
  // them, against what it expected of them (as production reads them from the ledger between plans,
  // jobs/refresh/policy.ts).
  let expectation: Expectation = { since: 0, from: 0 };
  const plansSyncs = (now: number) =>
    planMadeAt === null || o.plansSyncsIgnored
      ? null
      : {
          ...figures.syncsSince(
            plansSyncsFrom(
              expectation.since,
              now,
              o.maxAgeDays * MS_PER_DAY,
              o.budgetPerDay / 86_400,
              tickMs,
            ),
            PLANS_SYNCS_READ,
          ),
          expected: plan.changedShare,
        };
  const plan = createPlan(policy, o, world, copies, random, judge, (at) => figures.auditObservationsOf(at));
  const figures = new Figures(policy, o, world, copies);
  const version = new Int32Array(n);
  const heap = new DueHeap(version);
  // Each subscriber's due time as the heap has it (what `onClaim` reports).
  const dueAt = new Float64Array(n);
  const schedule = (due: number, id: number) => {
    dueAt[id] = due;
    heap.push(due, id);
  };

  // The plan the workers read last: none yet when they start, with the refresh.
  let workerParams = plan.params;
  let workerReadAt = Number.NEGATIVE_INFINITY;
  // The audit's peeks at copies it does not sync (SimOptions.auditWeight): a stream of their own, so
  // that the fleet's size moves nothing else of the run.
  const peeks = rng(o.seed ^ 0x27d4eb2f);
  const peekKnown = () => {
    let j = Math.floor(peeks() * n);
    while (!copies.known[j]) j = Math.floor(peeks() * n);
    return j;
  };
  const sync = (id: number, now: number, audit = false) => {
    const changed = world.nextChange[id]! <= now;
    let drawn: false | { samples: number; found: number } = false;
    if (audit) {
      // This draw and the (weight − 1) others production's larger share would make, at random
      // (the weight's fraction by chance), each found stale or not as its copy is now.
      const fraction = auditWeight % 1;
      const samples = Math.floor(auditWeight) + (fraction > 0 && peeks() < fraction ? 1 : 0);
      // A copy never synced is stale for the audit as for the estimate: production's draw of it
      // inserts its cards, and an insert counts as found changed (db/refresh `readFreshness`).
      // Counted by its wallet's next change alone, an intake's newcomers read fresh, the audit fell
      // far below the estimate, and the plan swung between refitting and going round in turn.
      const staleNow = (j: number) => copies.lastSuccessAt(j) === null || world.nextChange[j]! <= now;
      let found = staleNow(id) ? 1 : 0;
      // Each draw as an observation too (its copy's age, and whether it had changed): what the
      // plan refits the population's rate from when the estimate is above the audit.
      const seen: Observation[] = [];
      const observe = (j: number, stale: boolean) => {
        const last = copies.lastSuccessAt(j);
        // As far back as production looks for the success before a draw (db/refresh `auditDraws`).
        if (last !== null && now > last && now - last <= AUDIT_DRAW_SPAN_MAX_AGES * o.maxAgeDays * MS_PER_DAY)
          seen.push(observation((now - last) / MS_PER_DAY, stale));
      };
      observe(id, changed);
      for (let k = 1; k < samples; k++) {
        const j = peekKnown();
        const stale = staleNow(j);
        if (stale) found += 1;
        observe(j, stale);
      }
      figures.auditObserved(now, seen);
      drawn = { samples: Math.max(1, samples), found };
    }
    figures.sync(id, now, changed, drawn);
    o.onSync?.({ id, at: now, ratePerDay: world.trueRate[id]!, changed, audit });
    if (changed) world.advance(id, now);
    seenNewest[id] = world.newestCreated[id]!;
    const update = afterSuccess(
      {
        // Null while never synced: an intake's subscriber's first sync, or everyone's first in the
        // e2e world; there is no interval to observe.
        lastSuccessAt: copies.lastSuccessAt(id),
        observations: observations[id]!,
        ratePerDay: rate[id]!,
        evidence: copies.answerEvidence(id, now),
      },
      changed,
      now,
      o.workerPlanSeconds === undefined ? plan.params : workerParams,
      o.explore ? draws() : undefined,
    );
    observations[id] = update.observations;
    rate[id] = update.ratePerDay;
    copies.staleRate[id] = update.staleRatePerDay;
    lastSync[id] = now;
    if (policy === 'continuous' || policy === 'nightly-by-estimate') schedule(update.nextRefreshAt, id);
    else if (policy === 'oracle') schedule(plan.dueOf(id, now), id);
  };

  plan.replan(0);
  if (policy === 'continuous' || policy === 'nightly-by-estimate' || policy === 'oracle') {
    // The oracle's first due times are spread over each interval, or they all fall due at once.
    for (let id = 0; id < n; id++) {
      if (copies.known[id]) schedule(policy === 'oracle' ? plan.dueOf(id, 0) * random() : 0, id);
    }
  }
  // An intake (`o.intake`): its subscribers as an operator's enqueue puts them, ahead of the refresh.
  const intakeMs = o.intake ? o.intake.atDays * MS_PER_DAY : Number.POSITIVE_INFINITY;
  const enqueued: number[] = [];
  let enqueuedNext = 0;

  let markedAt: number | null = null;
  let carry = 0;
  let cursor = 0;
  let sweeping = false;
  let sweepOrder: number[] = [];
  let perSecond = o.budgetPerDay / 86_400;
  let nextReplan = 0;
  let nextAuditCheck = 0;
  let plansActingOnAudit = 0;
  const retuneMs = o.retune ? o.retune.atDays * MS_PER_DAY : Number.POSITIVE_INFINITY;
  for (let now = 0; now < endMs; now += tickMs) {
    if (o.retune && now >= retuneMs && now < retuneMs + tickMs) {
      // The operator's restart with the new settings: every worker reads the new plan at once.
      const r = o.retune;
      o.budgetPerDay *= r.budgetFactor;
      o.maxAgeDays *= r.maxAgeFactor;
      if (r.replanSeconds !== undefined) o.replanSeconds = r.replanSeconds;
      if (r.workerPlanSeconds !== undefined) o.workerPlanSeconds = r.workerPlanSeconds;
      perSecond = o.budgetPerDay / 86_400;
      nextReplan = now;
      workerReadAt = Number.NEGATIVE_INFINITY;
    }
    if (o.wakeUp && now >= o.wakeUp.atDays * MS_PER_DAY && now < o.wakeUp.atDays * MS_PER_DAY + tickMs) {
      // Quiet wallets wake: the oracle knows at once, the others learn it from their syncs.
      const wakeUp = o.wakeUp;
      world.wake(now, wakeUp, (id) => {
        if (policy === 'oracle') {
          schedule(now + intervalDays(wakeUp.ratePerDay, plan.params) * MS_PER_DAY * random(), id);
        }
      });
      if (policy === 'oracle') nextReplan = now;
    }
    if (
      o.massChange &&
      now >= o.massChange.atDays * MS_PER_DAY &&
      now < o.massChange.atDays * MS_PER_DAY + tickMs
    ) {
      world.changeAll(now);
    }
    if (
      judge &&
      now < nextReplan &&
      now >= nextAuditCheck &&
      plan.audit !== 'round-robin' &&
      planMadeAt !== null &&
      planEstimate !== null
    ) {
      // Between plans, as the refresh does every AUDIT_CHECK_SECONDS: the draws since the plan
      // against the estimate it was made on; a disagreement plans again at once.
      nextAuditCheck = now + AUDIT_CHECK_SECONDS * 1000;
      const sincePlan = figures.auditSince(planMadeAt);
      if (
        auditAction(planEstimate, { lastMaxAge: null, sincePlan, plansSyncs: plansSyncs(now) }) ===
        'round-robin'
      )
        nextReplan = now;
    }
    if (now >= nextReplan) {
      const before = plan.params;
      const wentRound = plan.audit === 'round-robin';
      // Read before the plan changes, as its judge reads them (src/freshness `auditAction`).
      const held = plansSyncs(now);
      const syncsMissed = held !== null && syncsDisagree(held.expected, held);
      const inForce = planMadeAt === null ? null : { ...expectation, roundRobin: wentRound };
      plan.replan(now);
      planMadeAt = now;
      expectation = expectationSince(
        inForce,
        { expected: plan.changedShare, roundRobin: plan.audit === 'round-robin' },
        now,
      );
      if (plan.audit !== 'none') plansActingOnAudit += 1;
      if (policy === 'continuous' && plan.params.prior.mixture && !before.prior.mixture) {
        // As production's replan does (jobs/refresh/policy.ts): the first plan with a mixture
        // stores a stale rate for each subscriber with observations synced before it.
        for (let id = 0; id < n; id++) {
          const seen = observations[id];
          if (!seen?.length || copies.staleRate[id] != null) continue;
          copies.staleRate[id] = staleRateOf(seen, copies.evidenceAt(id, lastSync[id]!), plan.params);
        }
      }
      if (policy === 'continuous') {
        // As production's replan does (jobs/refresh/continuous.ts): due times beyond the plan's longest
        // interval are pulled in, and so are those of subscribers seen once when the population's
        // rate now asks sooner; a plan that goes round in turn because its own syncs found nearly everything changed puts back the due times
        // planned sooner than the round (src/freshness/schedule.ts `pullIn`).
        const pull = pullIn(before, plan.params, { roundRobin: plan.audit === 'round-robin', syncsMissed });
        for (let id = 0; id < n; id++) {
          if (!copies.known[id]) continue;
          const last = copies.lastSuccessAt(id);
          const seenOnce = last !== null && (observations[id]?.length ?? 0) === 0;
          const by = Math.min(
            (last ?? now) + pull.longestDays * MS_PER_DAY,
            seenOnce && pull.seenOnceDays !== null
              ? last + pull.seenOnceDays * MS_PER_DAY
              : Number.POSITIVE_INFINITY,
          );
          if (dueAt[id]! > Math.max(now, by)) schedule(Math.max(now, by), id);
          else if (
            pull.inTurnDays !== null &&
            last !== null &&
            dueAt[id]! < last + pull.inTurnDays * MS_PER_DAY
          )
            schedule(last + pull.inTurnDays * MS_PER_DAY, id);
        }
      }
      nextReplan = now + (o.replanSeconds ?? 3600) * 1000;
    }
    if (o.workerPlanSeconds !== undefined && now - workerReadAt >= o.workerPlanSeconds * 1000) {
      workerParams = plan.params;
      workerReadAt = now;
    }
    const a = allowance(markedAt, now, perSecond, 2 + tickMs / 1000);
    markedAt = a.markedAt;
    let count = a.count;
    if (now >= intakeMs && now < intakeMs + tickMs) {
      // `cards-sync enqueue` registers each id it does not know as a known, never-synced row: the
      // estimate counts it from now on, and the refresh leaves it to the operator's job (which goes
      // ahead of the refresh) for a claim's lease, as db/sync/subscribers.ts does. After this tick's
      // plan: the plan in force was made for the subscribers before them until the next (a plan
      // made at once on their arrival measured no better in the intake world).
      for (let id = 0; id < n; id++) {
        if (copies.known[id]) continue;
        copies.arrive(id);
        enqueued.push(id);
        if (policy === 'continuous' || policy === 'nightly-by-estimate')
          schedule(now + claimLeaseMs(o.maxAgeDays * MS_PER_DAY), id);
      }
    }
    for (; count > 0 && enqueuedNext < enqueued.length; count--) sync(enqueued[enqueuedNext++]!, now);
    if (policy === 'round-robin') {
      for (; count > 0; count--) {
        while (world.arrivesAt[cursor]! > now) cursor = (cursor + 1) % n;
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
      if (o.auditOnTop) split.scheduled = count;
      // One claim a tick, then its syncs, as the scheduler claims and the workers sync: a subscriber
      // is synced at most once a tick, however soon its sync plans the next (until then its claim
      // holds it). Popped and synced at once, one whose plan is shorter than the tick would be
      // synced again and again at the same moment, observing nothing, and spend the tick.
      const claimed: number[] = [];
      const claim = (id: number) => {
        afterClaim(
          { lastSuccessAt: copies.lastSuccessAt(id), observations: observations[id]!, ratePerDay: rate[id]! },
          now,
          plan.params,
        );
        o.onClaim?.({ id, dueAt: dueAt[id]!, at: now });
        claimed.push(id);
      };
      // Everyone due first, in due order, as the claim's index read takes them.
      while (claimed.length < split.scheduled && (heap.peekDue() ?? Number.POSITIVE_INFINITY) <= now)
        claim(heap.pop()!);
      if (claimed.length < split.scheduled && (policy === 'oracle' || policy === 'continuous')) {
        // The budget left over: a window of those due soonest, of which the policy's chooser picks
        // (db/refresh/schedule.ts claimAhead); the rest go back as they were.
        const left = split.scheduled - claimed.length;
        const window: number[] = [];
        while (window.length < aheadWindow(left)) {
          const id = heap.pop();
          if (id === undefined) break;
          window.push(id);
        }
        const chosen = new Set(
          chooseAhead(
            window.map((id) => ({ id, dueAt: dueAt[id]!, lastSuccessAt: copies.lastSuccessAt(id) })),
            left,
            now,
          ),
        );
        for (const id of window) {
          if (chosen.has(id)) claim(id);
          else schedule(dueAt[id]!, id);
        }
      } else {
        while (claimed.length < split.scheduled) {
          const id = heap.pop();
          if (id === undefined) break;
          claim(id);
        }
      }
      for (const id of claimed) sync(id, now);
      for (let k = 0; k < split.audit; k++) {
        // The audit draws from the subscribers the service holds.
        let id = Math.floor(random() * n);
        while (!copies.known[id]) id = Math.floor(random() * n);
        sync(id, now, true);
      }
    }
    figures.snapshot(now, plan.params);
    o.onTick?.(now, plan.params, copies, world);
  }
  const result = figures.result(plan.params, plan.keepsMaxAge);
  return policy === 'continuous' ? { ...result, plansActingOnAudit } : result;
}
