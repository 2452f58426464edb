import { hostname } from 'node:os';
import { DelayedError, type Job, type Queue, Worker } from 'bullmq';
import type { Db } from '../../db/client.js';
import type { ApiClient } from '../../src/api/index.js';
import { auditAction } from '../../src/audit/index.js';
import type { Logger } from '../../src/logging/index.js';
import { packageVersion } from '../../src/shared/index.js';
import type { RedisClient } from '../redis.js';
import {
  keysWorkingElsewhere,
  readKeyVerdicts,
  recordKeyRejected,
  recordKeyWorks,
} from './api-key-verdicts.js';
import { describeRejectedKey, pauseQueue, type RejectedKey } from './pause-record.js';

// A rejected API key (401/403). When another key works for a live process of the fleet, the fault
// is this process's key: it stops taking jobs and exits, and the fleet goes on. Otherwise (its key
// is the only one, or every key in use is rejected) the queue is paused for every worker, naming the
// process and key that paused it. Either way no job fails or loses an attempt.

const AUTH_FIX =
  'the Saved Cards API rejected the key: processing is paused and no job was failed. ' +
  'Fix CARDS_API_KEY (or the file CARDS_API_KEY_FILE names), restart the workers so they read it, ' +
  'then run `cards-sync resume`';

/** A process notes that its key works at most this often. */
const WORKS_NOTE_MS = 10_000;

export interface KeyRejectionDeps {
  queue: Queue;
  redis: RedisClient;
  db: Db;
  api: Pick<ApiClient, 'keyFingerprint'>;
  logger: Logger;
  /** This process's fleet id (src/fleet/registry.ts); without it, its key's successes are not noted. */
  fleetId?: string;
  /** The ids of the live processes of the fleet, asked when the key is rejected. */
  liveProcessIds?: () => Promise<ReadonlySet<string>>;
  /**
   * Called once when this process's own key is rejected while another key works for a live process:
   * the process stops taking jobs. Without it, every rejection pauses the queue.
   */
  onOwnKeyRejected?: (message: string) => void;
}

/** What the processor calls on a success (`worked`) and on a rejected key (`rejected`, which throws). */
export function keyRejectionHandler(deps: KeyRejectionDeps) {
  const prefix = deps.queue.opts.prefix ?? 'bull';
  const fingerprint = deps.api.keyFingerprint;
  const me = { id: deps.fleetId ?? null, host: hostname(), pid: process.pid, version: packageVersion() };
  let notedAt = 0;
  let logged = false;
  let stopping = false;
  let deciding: Promise<void> | undefined;

  const audit = async (action: string, detail: Record<string, unknown>) => {
    const error = await auditAction(deps.db, {
      actor: me.id ?? `${me.host}:${me.pid}`,
      source: 'cli',
      action,
      detail,
    });
    if (error)
      deps.logger.warn({ err: { message: error.message }, action }, 'audit row (admin_actions) not written');
  };

  const decide = async (httpStatus: number, reason: string) => {
    const rejectedKey: RejectedKey = { fingerprint, httpStatus, process: me };
    const fields = {
      keyFingerprint: fingerprint,
      httpStatus,
      fleetId: me.id,
      host: me.host,
      pid: me.pid,
      version: me.version,
    };
    let working: string[] = [];
    if (deps.onOwnKeyRejected && deps.liveProcessIds) {
      try {
        const [live, verdicts] = await Promise.all([
          deps.liveProcessIds(),
          readKeyVerdicts(deps.redis, prefix),
        ]);
        working = keysWorkingElsewhere(verdicts, fingerprint, live);
      } catch (error) {
        // No evidence that another key works: the fleet is paused, as it always was.
        deps.logger.warn({ err: { message: (error as Error).message } }, 'could not read which keys work');
      }
    }
    const scope = working.length > 0 ? 'process' : 'fleet';
    await recordKeyRejected(deps.redis, prefix, { ...rejectedKey, scope, workingKeys: working }).catch(
      (error: Error) =>
        deps.logger.warn({ err: { message: error.message } }, 'could not record the rejection'),
    );
    if (scope === 'process') {
      stopping = true;
      const message =
        `the Saved Cards API rejected this worker's API key ${fingerprint} (HTTP ${httpStatus}) while ` +
        `key ${working.join(', ')} works for other live workers: the fault is this process's key, so it takes ` +
        `no more jobs and exits; the queue is not paused and the rest of the fleet goes on. Fix CARDS_API_KEY ` +
        `(or the file CARDS_API_KEY_FILE names) of this process on ${me.host} (pid ${me.pid}) and start it again`;
      deps.logger.error({ ...fields, workingKeys: working }, message);
      await audit('key_rejected', { scope, reason, rejectedKey, workingKeys: working });
      deps.onOwnKeyRejected?.(message);
      return;
    }
    const wrote = await pauseQueue(
      deps.queue,
      deps.redis,
      { by: 'auth_rejected', reason, actor: me.id ?? `${me.host}:${me.pid}`, rejectedKey },
      { keepFirst: true },
    );
    if (!logged) {
      logged = true;
      deps.logger.error(fields, `${AUTH_FIX}. The rejected key: ${describeRejectedKey(rejectedKey)}`);
    }
    if (wrote) await audit('pause', { by: 'auth_rejected', reason, rejectedKey });
  };

  return {
    /** The API accepted the key: noted for the fleet (at most every 10 s), and a later rejection is news. */
    worked(): void {
      logged = false;
      if (deps.fleetId === undefined || Date.now() - notedAt < WORKS_NOTE_MS) return;
      notedAt = Date.now();
      recordKeyWorks(deps.redis, prefix, fingerprint, deps.fleetId).catch(() => {
        notedAt = 0;
      });
    },
    /** Set once this process's own key was found at fault: it takes no job any more. */
    get stopping(): boolean {
      return stopping;
    },
    /**
     * Hands a job back untouched, no attempt used, for another worker: straight to the queue, since a
     * worker that is closing would leave a rate-limited job active until it stalls.
     */
    async handBack(job: Job, token: string): Promise<never> {
      await job.moveToWait(token);
      throw new DelayedError();
    },
    /** The API rejected the key: decides (once at a time), then hands the job back, no attempt used. */
    async rejected(job: Job, token: string | undefined, httpStatus: number, reason: string): Promise<never> {
      if (!stopping) {
        deciding ??= decide(httpStatus, reason).finally(() => {
          deciding = undefined;
        });
        await deciding;
      }
      if (stopping && token !== undefined) return this.handBack(job, token);
      // Back to the (now paused) queue.
      throw Worker.RateLimitError();
    },
  };
}
