import { setMaxListeners } from 'node:events';
import type pg from 'pg';
import {
  type ClaimedDelivery,
  claimDeliveries,
  enabledEndpointIds,
  pruneDeliveries,
  pruneRemovedEndpoints,
} from '../../db/webhooks/index.js';
import type { ChangeSignal } from '../../src/events/index.js';
import type { Logger } from '../../src/logging/index.js';
import type { KeyRing } from '../../src/tokens/index.js';
import {
  attemptSender,
  DEFAULT_SCHEDULE,
  endpointTarget,
  FANOUT_PAGE,
  type RetrySchedule,
  type Target,
  takeEvents,
  type WebhookSender,
} from '../../src/webhooks/index.js';

// The delivery loop each worker runs beside its sync jobs (docs/webhooks.md). It shares nothing with the
// sync queue: no BullMQ slot, no API rate limiter, its own Postgres pool, so an ops re-sync never
// waits behind a webhook. Work is claimed from Postgres (FOR UPDATE SKIP LOCKED), so any number of
// workers share it. Each endpoint gets at most `perEndpoint` attempts in flight per worker, so a
// slow endpoint takes its own slots and never the others'.

/** Finished deliveries dropped by one statement of the retention. */
const PRUNE_BATCH = 10_000;
/** Between attempts, the feed is read for an endpoint at most this often (unless a page was full). */
const TAKE_GAP_MS = 50;
/** Between attempts, the endpoints' list and secrets are read at most this often. */
const ENDPOINTS_TTL_MS = 1000;

export interface DeliveryOptions {
  pool: pg.Pool;
  ring: KeyRing;
  sender: WebhookSender;
  logger: Logger;
  /** This worker's name in `locked_by` (its fleet id). */
  workerId: string;
  /** Attempts in flight in this worker, all endpoints together. Default 64. */
  concurrency?: number;
  /** Attempts in flight in this worker for one endpoint. Default 8. */
  perEndpoint?: number;
  /** How often the loop looks for work when there was none, ms. Default 250; 1000 with `signal`. */
  pollMs?: number;
  /** The outbox's commit notifications: an idle loop wakes at a new event rather than at its next poll. */
  signal?: ChangeSignal;
  /** A lease outlives an attempt's deadline by this much; a crashed worker's work is free then. Default: timeout + 30 s. */
  leaseMs: number;
  /** Finished deliveries older than this many days are dropped, hourly. Default 30 (`CHANGE_EVENTS_RETENTION_DAYS`). */
  retentionDays?: number;
  /** Internal, for tests: finished deliveries one statement of the retention drops. Default 10,000. */
  pruneBatch?: number;
  /** Internal, for tests: a shorter retry schedule. Default {@link DEFAULT_SCHEDULE}. */
  schedule?: RetrySchedule;
  /** Called after each attempt is recorded (metrics). */
  onAttempt?: (
    endpointId: number,
    outcome: 'delivered' | 'retry' | 'dead' | 'lost',
    latencyMs: number,
  ) => void;
}

export interface DeliveryLoop {
  /** Stops claiming, waits up to `timeoutMs` for attempts in flight, then cuts them (given back untried). */
  stop(timeoutMs: number): Promise<void>;
}

/** What the loop and the attempts it launched tell each other. */
interface LoopState {
  stopping: boolean;
  /** Ends the loop's wait after a pass; set only while it waits. */
  wake: (() => void) | undefined;
  /**
   * An attempt that ends while a pass runs finds no wait to end: it leaves this mark instead, so
   * the loop passes again at once rather than sleeping a poll with a slot free.
   */
  freed: boolean;
  /** A feed read was put off: the loop comes back within TAKE_GAP_MS, not after a whole poll. */
  deferred: boolean;
}

/** What a pass works with. */
interface Parts {
  attempts: ReturnType<typeof attemptsInFlight>;
  prunes: ReturnType<typeof retention>;
  feed: ReturnType<typeof feedReads>;
  endpoints: ReturnType<typeof endpointsRead>;
}

export function startDeliveryLoop(o: DeliveryOptions): DeliveryLoop {
  const pollMs = o.pollMs ?? (o.signal ? 1000 : 250);
  const state: LoopState = { stopping: false, wake: undefined, freed: false, deferred: false };
  const attempts = attemptsInFlight(o, state);
  const prunes = retention(o, state);
  const parts = { attempts, prunes, feed: feedReads(o, state, pollMs), endpoints: endpointsRead(o) };
  const loop = runLoop(o, state, pollMs, (between) => pass(o, state, between, parts));

  return {
    async stop(timeoutMs) {
      state.stopping = true;
      state.wake?.();
      await loop;
      await prunes.running();
      await attempts.settle(timeoutMs);
    },
  };
}

/** The attempts this worker has in flight, per endpoint and in all, and their launching. */
function attemptsInFlight(o: DeliveryOptions, state: LoopState) {
  const concurrency = o.concurrency ?? 64;
  const perEndpoint = o.perEndpoint ?? 8;
  const inFlight = new Map<number, number>();
  const running = new Set<Promise<void>>();
  const abort = new AbortController();
  // Every attempt in flight listens on it: more than Node's default of 10 is the plan, not a leak.
  setMaxListeners(concurrency + 1, abort.signal);
  let total = 0;
  const attempt = attemptSender({ ...o, schedule: o.schedule ?? DEFAULT_SCHEDULE, signal: abort.signal });

  return {
    /** How many more attempts an endpoint may start now. */
    free(endpointId: number): number {
      return Math.min(perEndpoint - (inFlight.get(endpointId) ?? 0), concurrency - total);
    },
    launch(d: ClaimedDelivery, target: Target): void {
      total++;
      inFlight.set(d.endpointId, (inFlight.get(d.endpointId) ?? 0) + 1);
      const p = attempt(d, target)
        .catch((error: unknown) => {
          // The attempt's row stays leased; another worker takes it when the lease ends.
          o.logger.error(
            { endpoint: d.endpointId, delivery: d.id, err: (error as Error).message },
            'webhook attempt could not be recorded',
          );
        })
        .finally(() => {
          total--;
          inFlight.set(d.endpointId, (inFlight.get(d.endpointId) ?? 1) - 1);
          running.delete(p);
          state.freed = true;
          state.wake?.();
        });
      running.add(p);
    },
    /** Waits up to `timeoutMs` for the attempts in flight, then cuts them (given back untried). */
    async settle(timeoutMs: number): Promise<void> {
      const all = Promise.allSettled([...running]);
      const cut = setTimeout(() => abort.abort(), timeoutMs);
      await all;
      clearTimeout(cut);
    },
  };
}

/** The hourly retention of finished deliveries, run beside the passes. */
function retention(o: DeliveryOptions, state: LoopState) {
  let prunedAt = 0;
  let pruning: Promise<void> | undefined;

  /**
   * Drops finished deliveries past the retention, a batch at a time for up to a second; when more
   * are due, again in 10 s rather than in an hour: at 100 deliveries a second an hour makes 360,000,
   * which one batch an hour would never catch up with.
   */
  async function prune(): Promise<void> {
    const batch = o.pruneBatch ?? PRUNE_BATCH;
    const started = Date.now();
    let dropped = 0;
    let last = 0;
    do {
      last = await pruneDeliveries(o.pool, o.retentionDays ?? 30, batch);
      dropped += last;
    } while (last === batch && !state.stopping && Date.now() - started < 1000);
    if (last < batch && !state.stopping) {
      const removed = await pruneRemovedEndpoints(o.pool, o.retentionDays ?? 30, batch);
      dropped += removed;
      if (removed === batch) last = batch;
    }
    if (last === batch) prunedAt = Date.now() - 3_590_000;
    if (dropped > 0) o.logger.info({ dropped }, 'old webhook deliveries dropped');
  }

  return {
    /** Starts the retention when it is due and not running already. */
    startIfDue(): void {
      if (pruning !== undefined || Date.now() - prunedAt <= 3_600_000) return;
      prunedAt = Date.now();
      pruning = prune()
        .catch((error: unknown) =>
          o.logger.warn({ err: (error as Error).message }, 'old webhook deliveries could not be dropped'),
        )
        .finally(() => {
          pruning = undefined;
        });
    },
    /** The retention under way, if one is. */
    running: (): Promise<void> | undefined => pruning,
  };
}

// The feed is read for an endpoint only when it may hold something new: a commit was heard since
// the last read, that read took a full page, or a poll has passed (a commit heard while its
// events were still under the feed's horizon, a notification lost to a reconnect). While the
// loop delivers flat out this saves a transaction of five round trips before each claim.
// Between attempts (a pass because a slot came free), commits heard are gathered for up to
// TAKE_GAP_MS into one read rather than one read each.
// A read that the horizon cut short (a running transaction holds events back, and may end without
// a notification) or that another worker was doing is looked at again after the gap too.
function feedReads(o: DeliveryOptions, state: LoopState, pollMs: number) {
  const took = new Map<number, { at: number; heard: number; full: boolean; recheck: boolean }>();
  const heard = () => o.signal?.received ?? -1;
  return {
    due(endpointId: number, between: boolean): boolean {
      const last = took.get(endpointId);
      if (last === undefined || o.signal === undefined || last.full) return true;
      const since = Date.now() - last.at;
      const news = last.heard !== heard();
      if (since >= pollMs) return true;
      if (news && (!between || since >= TAKE_GAP_MS)) return true;
      if (last.recheck && since >= TAKE_GAP_MS) return true;
      // Put off: the loop comes back within the gap, not after a whole poll.
      if (news || last.recheck) state.deferred = true;
      return false;
    },
    async take(endpointId: number): Promise<void> {
      // What was heard before the read: a commit heard during it may be past the read's snapshot.
      const before = { at: Date.now(), heard: heard() };
      const taken = await takeEvents(o.pool, endpointId);
      const recheck = taken === undefined || taken.heldBack;
      took.set(endpointId, { ...before, full: (taken?.read ?? 0) >= FANOUT_PAGE, recheck });
      if (recheck) state.deferred = true;
    },
  };
}

// What a pass reads of the endpoints: which are enabled, and each one's URL and opened secrets.
// Read afresh by a pass after a wait; between attempts, kept for up to ENDPOINTS_TTL_MS, so a
// disabled endpoint, a new one or a rotated secret is seen within that.
function endpointsRead(o: DeliveryOptions) {
  let endpoints = {
    at: Number.NEGATIVE_INFINITY,
    ids: [] as number[],
    targets: new Map<number, Target | undefined>(),
  };
  return {
    async enabledNow(between: boolean): Promise<number[]> {
      if (!between || Date.now() - endpoints.at >= ENDPOINTS_TTL_MS) {
        endpoints = { at: Date.now(), ids: await enabledEndpointIds(o.pool), targets: new Map() };
      }
      return endpoints.ids;
    },
    async targetOf(endpointId: number): Promise<Target | undefined> {
      if (!endpoints.targets.has(endpointId)) {
        endpoints.targets.set(endpointId, await endpointTarget(o.pool, o.ring, endpointId));
      }
      return endpoints.targets.get(endpointId);
    },
  };
}

/** One pass over the endpoints (`between`: straight after an attempt, not after a wait); true when it started anything. */
async function pass(o: DeliveryOptions, state: LoopState, between: boolean, parts: Parts): Promise<boolean> {
  const { attempts, feed, endpoints } = parts;
  let started = false;
  // Beside the pass, not in it: a retention catching up does not hold the claims back.
  parts.prunes.startIfDue();
  for (const endpointId of await endpoints.enabledNow(between)) {
    if (state.stopping) break;
    if (feed.due(endpointId, between)) await feed.take(endpointId);
    const free = attempts.free(endpointId);
    if (free <= 0) continue;
    const claimed = await claimDeliveries(o.pool, {
      endpointId,
      limit: free,
      workerId: o.workerId,
      leaseMs: o.leaseMs,
    });
    if (claimed.length === 0) continue;
    const target = await endpoints.targetOf(endpointId);
    if (target === undefined) continue;
    for (const d of claimed) attempts.launch(d, target);
    started = true;
  }
  return started;
}

/** Passes until stopped, waiting between passes for a commit, an attempt's end or the poll. */
async function runLoop(
  o: DeliveryOptions,
  state: LoopState,
  pollMs: number,
  onePass: (between: boolean) => Promise<boolean>,
): Promise<void> {
  // Whether this pass comes straight after an attempt (busy, or woken by one ending) rather than
  // after a wait that a commit or the poll ended.
  let between = false;
  while (!state.stopping) {
    // Armed before the pass: an event committed while it runs still wakes the wait after it.
    const armed = await o.signal?.arm(pollMs).catch(() => undefined);
    let busy = false;
    state.freed = false;
    state.deferred = false;
    try {
      busy = await onePass(between);
    } catch (error) {
      o.logger.warn({ err: (error as Error).message }, 'webhook delivery pass failed; trying again');
    }
    if (!state.stopping) between = await waitAfterPass(state, pollMs, busy, armed);
    armed?.cancel();
  }
}

/** Resolves true when an attempt ends (or the pass was busy), false at a commit or the poll. */
function waitAfterPass(
  state: LoopState,
  pollMs: number,
  busy: boolean,
  armed: { woken: Promise<boolean> } | undefined,
): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const now = busy || state.freed;
    const timer = setTimeout(() => done(now), now ? 0 : state.deferred ? TAKE_GAP_MS : pollMs);
    void armed?.woken.then(() => done(false));
    function done(byAttempt: boolean) {
      clearTimeout(timer);
      state.wake = undefined;
      resolve(byAttempt);
    }
    state.wake = () => done(true);
  });
}
