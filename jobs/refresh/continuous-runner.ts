import { setTimeout as sleep } from 'node:timers/promises';
import type { Queue } from 'bullmq';
import { poolOf } from '../../db/client.js';
import {
  closeRefreshRun,
  createLease,
  inProgressRun,
  type Lease,
  markFanoutFinished,
  type RefreshRun,
  savePlan,
  setRefreshJobId,
  startRefreshRun,
} from '../../db/refresh/index.js';
import { settlesWithin } from '../redis.js';
import { createFairShare } from '../sync/index.js';
import { refreshBacklog } from './backlog.js';
import { createRunChecks } from './checks.js';
import { type ContinuousOptions, continuousFanout } from './continuous.js';
import { recordLeaseHolder } from './lease-holder.js';
import type { RefreshDeps, RefreshOptions } from './nightly.js';
import { REFRESH_PAYLOAD_VERSION, type RefreshJobData, runIsAlive } from './queue.js';

// REFRESH_MODE=continuous: every worker runs this loop; the one holding the lease
// (db/refresh/lease-session.ts) runs the current window (adopting the run a dead holder left, or
// opening the next), the others try to take the lease about once a second. A SIGKILL of the
// holder costs the second or two until another takes it, not a job lock's timeout.

/** Job ids of the lease's markers: a delayed job per window that tells older workers it is alive. */
const MARKER = 'continuous-lease-r';
const markerOf = (runId: number) => `${MARKER}${runId}`;

class HandBack extends Error {
  override readonly name = 'HandBack';
}

export interface ContinuousRefresh {
  /** Hands the lease over at once (between ticks) and stops. */
  close(): Promise<void>;
}

/** Starts the lease loop of REFRESH_MODE=continuous in this process. */
export function startContinuousRefresh(
  deps: RefreshDeps & {
    refreshQueue: Queue<RefreshJobData>;
    /** This process's fleet id, which `status` names as the lease's holder. */
    fleetId?: string;
  },
  options: RefreshOptions & { continuous: ContinuousOptions },
  /** How often a worker without the lease tries to take it, ms. Default 1000. */
  tryEveryMs = 1000,
): ContinuousRefresh {
  const o = options.continuous;
  const windowMs = o.windowMs ?? 3_600_000;
  const pollMs = options.pollMs ?? 1000;
  const lease: Lease = createLease(poolOf(deps.db));
  const checks = createRunChecks(deps, options);
  const claimShare = createFairShare(deps.syncQueue, deps.redis, options.floorShare);
  let closing = false;
  /** The run whose marker this process added last, removed when it lets the lease go. */
  let marked: number | undefined;
  const stopping = () => closing || (deps.stopping?.() ?? false);

  /** Marks the run as carried by the lease, for older workers (their runIsAlive sees a live job). */
  async function carry(run: RefreshRun): Promise<void> {
    const id = markerOf(run.id);
    // Added even when the run names it: a Redis that lost it (a restart without persistence) would
    // leave an adopted window looking dead to older workers. A no-op while the job exists.
    await deps.refreshQueue.add(
      'refresh',
      { v: REFRESH_PAYLOAD_VERSION, trigger: 'continuous', refreshRunId: run.id },
      { jobId: id, delay: windowMs + 86_400_000 },
    );
    marked = run.id;
    if (run.jobId !== id) await setRefreshJobId(lease.db, run.id, id);
  }

  /** The window to serve: the run in progress (adopted) or a new one; none while another must finish. */
  async function current(): Promise<RefreshRun | undefined> {
    const running = await inProgressRun(deps.db);
    if (running === undefined) {
      const started = await startRefreshRun(lease.db, { trigger: 'continuous' });
      if (!started.started) return undefined;
      await carry(started.run);
      deps.logger.info({ refreshRunId: started.run.id }, 'continuous refresh window opened');
      return started.run;
    }
    // A manual or nightly refresh, or a window the breaker halted: it finishes (or is resumed) first.
    if (running.trigger !== 'continuous' || running.status !== 'running') return undefined;
    // A job of an older worker (a rolling upgrade) still carries it: that one spends the budget.
    const byJob = running.jobId !== null && !running.jobId.startsWith(MARKER);
    if (byJob && (await runIsAlive(deps.refreshQueue, running))) return undefined;
    await carry(running);
    return running;
  }

  /** Serves one window while the lease is held; true when it closed (the next opens at once). */
  async function serve(): Promise<boolean> {
    let run = await current();
    if (run === undefined) return false;
    const log = deps.logger.child({ refreshRunId: run.id, trigger: 'continuous' });
    if (run.plannedSubscribers === null) {
      run = await savePlan(lease.db, run.id, {
        plannedSubscribers: Math.round((o.budgetPerSec * windowMs) / 1000),
        rateBudgetPerSec: Math.ceil(o.budgetPerSec),
        expectedFinishAt: new Date(run.startedAt.getTime() + windowMs),
        nextRefreshAt: null,
      });
    } else {
      log.info({ enqueued: run.enqueued }, 'continuous refresh window taken over');
    }
    if (run.fanoutFinishedAt === null) {
      run = await continuousFanout(
        { db: deps.db, claims: lease.db, logger: log, syncQueue: deps.syncQueue },
        run,
        o,
        {
          check: checks.check,
          claimShare,
          backlog: () => refreshBacklog(deps.syncQueue, deps.redis),
          stopping,
          handBack: () => Promise.reject(new HandBack()),
        },
      );
      if (run.status !== 'running') return false;
      await markFanoutFinished(lease.db, run.id);
    }
    for (;;) {
      run = await checks.check(run);
      if (run.status !== 'running') return false;
      if (await checks.allDone(run)) break;
      if (stopping()) throw new HandBack();
      await claimShare();
      await sleep(pollMs);
    }
    // Closed only by the holder: the lease is confirmed first (its session still holds the lock).
    if (!(await lease.take())) return false;
    const closed = await closeRefreshRun(deps.db, run.id);
    log.info(
      { total: closed?.subscribersTotal, succeeded: closed?.succeeded, failed: closed?.failed },
      'continuous refresh window closed',
    );
    await deps.refreshQueue.remove(markerOf(run.id)).catch(() => 0);
    marked = undefined;
    return true;
  }

  const loop = (async () => {
    let had = false;
    while (!stopping()) {
      let next = false;
      try {
        const holds = await lease.take();
        if (holds !== had) {
          deps.logger.info(holds ? 'took the continuous refresh lease' : 'lost the continuous refresh lease');
          had = holds;
          const session = lease.session();
          // Who holds it, for `status`; a failed write costs only the holder's name there.
          if (session !== undefined) {
            await recordLeaseHolder(deps.redis, deps.syncQueue.opts.prefix ?? 'bull', {
              fleetId: deps.fleetId ?? null,
              session,
            }).catch(() => {});
          }
        }
        if (holds) next = await serve();
      } catch (error) {
        if (error instanceof HandBack) break;
        deps.logger.warn(
          { err: { message: (error as Error).message } },
          'continuous refresh: a tick failed; trying again in a second',
        );
      }
      if (!next && !stopping()) await sleep(tryEveryMs);
    }
    // The marker goes with the lease: a worker of this release taking it adds it again (carry), and
    // with none left (a rollback) an older worker's minute job finds the window's job gone and
    // carries on, instead of waiting out the marker's delay (a day). Removed only while the lease
    // is confirmed ours, so never from under another holder.
    if (marked !== undefined && lease.held() && (await lease.take().catch(() => false))) {
      await deps.refreshQueue.remove(markerOf(marked)).catch(() => 0);
    }
    // Shutdown hands over at once: the lock goes with the unlock (or with the session).
    await lease.close();
  })();

  return {
    async close() {
      closing = true;
      // A tick stuck on a dead Redis or Postgres is not waited for past this; the session closes anyway.
      if (!(await settlesWithin(loop, 10_000))) await lease.close();
    },
  };
}
