import {
  afterClaim,
  afterSuccess,
  allowance,
  intervalDays,
  MS_PER_DAY,
  splitForAudit,
} from '../../src/freshness/index.js';
import { createCopies } from './copies.js';
import { DueHeap } from './due-heap.js';
import { Figures } from './figures.js';
import { createPlan } from './plan.js';
import type { PolicyName, SimOptions, SimResult } from './types.js';
import { createWorld } from './world.js';

// A virtual-clock simulator of the refresh: subscribers whose cards change as Poisson processes
// at stated rates, a request budget, and a policy that decides whom to sync when. The continuous
// policy is the product's own code (src/freshness/): the estimator, the threshold, the due times,
// the token bucket and the audit split; the earliest-due-first choice that Postgres makes with
// its index is a heap here. Nothing sleeps: a 30-day run takes seconds.
//
// This file holds the clock: each tick's budget spent as the policy chooses, and the syncs. The
// world it syncs against is bench/freshness/world.ts, the plan bench/freshness/plan.ts, what it
// measures bench/freshness/figures.ts; the options and results are in bench/freshness/types.ts.

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

/** Runs one policy over the population; the population and its changes repeat for a given seed. */
export function simulate(policy: PolicyName, o: SimOptions): SimResult {
  const n = o.subscribers;
  const random = rng(o.seed);
  const changes = rng(o.seed ^ 0x9e3779b9);
  const draws = rng(o.seed ^ 0x2545f491);
  const cards = rng(o.seed ^ 0x5bd1e995);
  const tickMs = (o.tickSeconds ?? 60) * 1000;
  const endMs = o.days * MS_PER_DAY;

  const world = createWorld(o, { random, changes, cards });
  const copies = createCopies(o, world.newestCreated);
  const { lastSync, rate, observations, seenNewest } = copies;
  const plan = createPlan(policy, o, world, copies, random);
  const figures = new Figures(policy, o, world, copies);
  const version = new Int32Array(n);
  const heap = new DueHeap(version);

  const sync = (id: number, now: number, audit = false) => {
    const changed = world.nextChange[id]! <= now;
    figures.sync(id, now, changed, audit);
    if (changed) world.advance(id, now);
    seenNewest[id] = world.newestCreated[id]!;
    const update = afterSuccess(
      {
        // An intake's subscriber: its first sync, no interval to observe.
        lastSuccessAt: copies.known[id] ? lastSync[id]! : null,
        observations: observations[id]!,
        ratePerDay: rate[id]!,
        evidence: copies.evidenceAt(id, now),
      },
      changed,
      now,
      plan.params,
      o.explore ? draws() : undefined,
    );
    observations[id] = update.observations;
    rate[id] = update.ratePerDay;
    lastSync[id] = now;
    copies.known[id] = 1;
    if (policy === 'continuous' || policy === 'nightly-by-estimate') heap.push(update.nextRefreshAt, id);
    else if (policy === 'oracle') heap.push(plan.dueOf(id, now), id);
  };

  plan.replan(0);
  if (policy === 'continuous' || policy === 'nightly-by-estimate' || policy === 'oracle') {
    // The oracle's first due times are spread over each interval, or they all fall due at once.
    for (let id = 0; id < n; id++) {
      if (copies.known[id]) heap.push(policy === 'oracle' ? plan.dueOf(id, 0) * random() : 0, id);
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
  const perSecond = o.budgetPerDay / 86_400;
  let nextReplan = 0;
  for (let now = 0; now < endMs; now += tickMs) {
    if (o.wakeUp && now >= o.wakeUp.atDays * MS_PER_DAY && now < o.wakeUp.atDays * MS_PER_DAY + tickMs) {
      // Quiet wallets wake: the oracle knows at once, the others learn it from their syncs.
      const wakeUp = o.wakeUp;
      world.wake(now, wakeUp, (id) => {
        if (policy === 'oracle') {
          heap.push(now + intervalDays(wakeUp.ratePerDay, plan.params) * MS_PER_DAY * random(), id);
        }
      });
      if (policy === 'oracle') nextReplan = now;
    }
    if (now >= nextReplan) {
      plan.replan(now);
      nextReplan = now + (o.replanSeconds ?? 3600) * 1000;
    }
    const a = allowance(markedAt, now, perSecond, 2 + tickMs / 1000);
    markedAt = a.markedAt;
    let count = a.count;
    if (now >= intakeMs && now < intakeMs + tickMs) {
      for (let id = 0; id < n; id++) if (!copies.known[id]) enqueued.push(id);
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
      for (let k = 0; k < split.scheduled; k++) {
        const id = heap.pop();
        if (id === undefined) break;
        afterClaim(
          { lastSuccessAt: lastSync[id]!, observations: observations[id]!, ratePerDay: rate[id]! },
          now,
          plan.params,
        );
        sync(id, now);
      }
      for (let k = 0; k < split.audit; k++) {
        // The audit draws from the subscribers the service holds.
        let id = Math.floor(random() * n);
        while (!copies.known[id]) id = Math.floor(random() * n);
        sync(id, now, true);
      }
    }
    figures.snapshot(now, plan.params);
  }
  return figures.result(plan.params, plan.keepsMaxAge);
}
