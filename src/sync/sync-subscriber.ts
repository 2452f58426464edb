import { type Db, poolOf } from '../../db/client.js';
import { isConnectionError, rootCause } from '../../db/errors.js';
import type { SyncTrigger } from '../../db/schema/index.js';
import { type ClockOptions, dbClock, findSubscriberIdByEmail, type SavedCard } from '../../db/sync/index.js';
import type { ApiClient, FetchOutcome, Target } from '../api/index.js';
import type { Logger } from '../logging/index.js';
import { redactExcerpt } from '../shared/index.js';
import { type CardTokens, TokenKeyError } from '../tokens/index.js';
import { tracing } from '../tracing/index.js';
import { SUPERSEDED } from './batch-plan.js';
import type { RunBase } from './cards-to-apply.js';
import { finishFailure, recordFailure } from './failure.js';
import { type CardWriter, directWriter } from './group-commit.js';
import { applyNotFound, DEFAULT_GONE_AFTER_NOT_FOUND } from './not-found.js';
import type { SyncResult } from './result.js';

export type { SyncResult };

export interface SyncDeps {
  db: Db;
  api: ApiClient;
  logger: Logger;
  /** How card tokens are stored and compared (sealed with CARD_TOKEN_ENCRYPTION=on). */
  tokens: CardTokens;
  /** Where answers are written. Default: each in a transaction of its own. */
  writer?: CardWriter;
  /**
   * `SYNC_GONE_AFTER_NOT_FOUND`: consecutive `not_found` answers after which a subscriber's active
   * cards are marked removed; 0 = never. Default 3.
   */
  goneAfterNotFound?: number;
  /**
   * `CHANGE_EVENTS=on`: changes are also written as change events. Default false. A `writer`
   * passed in is built with its own (the worker builds both from one config).
   */
  changeEvents?: boolean;
}

export interface SyncRequest {
  target: Target;
  trigger: SyncTrigger;
  jobId?: string;
  refreshRunId?: number;
  /** Cancels the HTTP request (the queue's abort signal). */
  signal?: AbortSignal;
  /** Which attempt of its job this is (1 = the first), for the trace. */
  attempt?: number;
  /**
   * Told of a 429 as soon as it arrives, before anything is recorded: the queue's rate limit
   * should hold every worker back without waiting for the database. Its failure is ignored.
   */
  onRateLimited?: (retryAfterMs: number) => Promise<unknown>;
}

/** `j***@example.com`: enough to recognise an e-mail in a log, not enough to harvest it. */
function maskEmail(email: string): string {
  const at = email.lastIndexOf('@');
  if (at <= 0) return '***';
  return `${email[0]}***${email.slice(at)}`;
}

/** The shared clock's rounds that follow on run in no trace (db/sync/clock.ts). */
const CLOCK_OPTIONS: ClockOptions = { detached: (fn) => tracing().detached(fn) };

/**
 * Syncs one subscriber: fetches the cards, then in one transaction under the subscriber's
 * advisory lock reconciles them, writes history and the `sync_runs` row, and updates
 * `subscribers`. Every outcome writes a `sync_runs` row. Never throws for an API problem; throws
 * only when the database cannot record anything at all.
 */
export async function syncSubscriber(deps: SyncDeps, request: SyncRequest): Promise<SyncResult> {
  const { db, api } = deps;
  // Asked of Postgres before the fetch: answers are ordered by one clock, not by each host's.
  const startedAt = await dbClock(poolOf(db), CLOCK_OPTIONS).now();
  const t0 = performance.now();
  const email = 'email' in request.target ? request.target.email : undefined;
  // Made on first use: a child logger costs a serialisation of its bindings, per sync.
  let child: Logger | undefined;
  const log = () =>
    (child ??= deps.logger.child({
      ...(email !== undefined ? { email: maskEmail(email) } : {}),
      trigger: request.trigger,
      ...(request.jobId ? { jobId: request.jobId } : {}),
    }));
  const base = {
    email: email ?? null,
    trigger: request.trigger,
    jobId: request.jobId ?? null,
    refreshRunId: request.refreshRunId ?? null,
    startedAt,
  };

  // One span per API attempt; the HTTP request itself is undici's span, its child.
  const outcome: FetchOutcome = await tracing().inSpan(
    'api.fetch_cards',
    { attributes: { 'cards_sync.attempt': request.attempt } },
    async (span) => {
      const o = await api.fetchCards(request.target, request.signal ? { signal: request.signal } : {});
      span.set({
        'cards_sync.api.outcome': o.kind,
        'cards_sync.api.code': o.kind === 'transient' && o.status === undefined ? o.code : String(o.status),
        'cards_sync.api.retryable': o.kind === 'transient' || o.kind === 'rate_limited',
      });
      return o;
    },
  );
  if (outcome.kind === 'rate_limited' && request.onRateLimited) {
    await request.onRateLimited(outcome.retryAfterMs).catch(() => {});
  }
  const apiInfo = {
    code:
      outcome.kind === 'transient' && outcome.status === undefined ? outcome.code : String(outcome.status),
    durationMs: outcome.durationMs,
  };
  const withApi = (r: Omit<SyncResult, 'api'>): SyncResult => ({ ...r, api: apiInfo });

  if (outcome.kind === 'ok') {
    try {
      const result = await applyCards(deps, request, outcome.cards, base);
      const durationMs = Math.round(performance.now() - t0);
      if (deps.logger.isLevelEnabled('info')) {
        log().info(
          { subscriberId: result.subscriberId, status: result.status, ...result.counts, durationMs },
          `sync ${result.status}`,
        );
      }
      return withApi({ ...result, durationMs });
    } catch (error) {
      const subscriberId =
        'subscriberId' in request.target
          ? request.target.subscriberId
          : (outcome.cards[0]?.subscriberId ?? null);
      if (error instanceof TokenKeyError) {
        // A stored token this process cannot read: not retried (the ring must change first), nothing written.
        return withApi(
          await recordFailure(deps.db, log, base, t0, {
            status: 'failed',
            subscriberId,
            errorCode: error.code,
            errorMessage: error.message,
            retryable: false,
          }),
        );
      }
      const root = rootCause(error);
      const message = redactExcerpt(root.message, [], 200);
      const code = root.code;
      log().warn({ errorCode: 'db_error', pgCode: code }, `sync could not be written: ${message}`);
      return withApi(
        await recordFailure(deps.db, log, base, t0, {
          status: 'failed',
          subscriberId,
          errorCode: isConnectionError(code) ? 'db_unavailable' : 'db_error',
          errorMessage: `the database refused the write: ${message}`,
          retryable: true,
        }),
      );
    }
  }

  let subscriberId: number | null = 'subscriberId' in request.target ? request.target.subscriberId : null;
  if (subscriberId === null && email !== undefined) {
    subscriberId = (await findSubscriberIdByEmail(db, email).catch(() => undefined)) ?? null;
  }
  switch (outcome.kind) {
    case 'not_found': {
      const goneAfter = deps.goneAfterNotFound ?? DEFAULT_GONE_AFTER_NOT_FOUND;
      const finishedAt = new Date(startedAt.getTime() + (performance.now() - t0));
      const { syncRunId, counts, errorMessage } = await applyNotFound(
        db,
        base,
        subscriberId,
        goneAfter,
        finishedAt,
        deps.changeEvents ?? false,
      );
      const failure = { status: 'not_found', subscriberId, errorCode: 'not_found', errorMessage } as const;
      return withApi(finishFailure(log, t0, { ...failure, retryable: false }, syncRunId, counts));
    }
    case 'invalid_response':
      return withApi(
        await recordFailure(deps.db, log, base, t0, {
          status: 'invalid_response',
          subscriberId,
          errorCode: 'invalid_response',
          errorMessage: outcome.message,
          retryable: false,
        }),
      );
    case 'auth_rejected':
      return withApi(
        await recordFailure(deps.db, log, base, t0, {
          status: 'auth_rejected',
          subscriberId,
          errorCode: `http_${outcome.status}`,
          errorMessage: `the API rejected the key: ${outcome.message}`,
          retryable: false,
          touchSubscriber: false,
        }),
      );
    case 'rate_limited':
      return withApi(
        await recordFailure(deps.db, log, base, t0, {
          status: 'rate_limited',
          subscriberId,
          errorCode: 'http_429',
          errorMessage: `rate limited; retry after ${outcome.retryAfterMs} ms`,
          retryable: true,
          retryAfterMs: outcome.retryAfterMs,
          touchSubscriber: false,
        }),
      );
    case 'transient':
      return withApi(
        await recordFailure(deps.db, log, base, t0, {
          status: 'failed',
          subscriberId,
          errorCode: outcome.code,
          errorMessage: outcome.message,
          retryable: true,
        }),
      );
    case 'rejected':
      return withApi(
        await recordFailure(deps.db, log, base, t0, {
          status: 'failed',
          subscriberId,
          errorCode: outcome.code,
          errorMessage: outcome.message,
          retryable: false,
        }),
      );
  }
}

async function applyCards(
  deps: SyncDeps,
  request: SyncRequest,
  cards: SavedCard[],
  run: RunBase,
): Promise<Omit<SyncResult, 'durationMs' | 'api'>> {
  const email = 'email' in request.target ? request.target.email : undefined;
  let subscriberId: number | null =
    'subscriberId' in request.target ? request.target.subscriberId : (cards[0]?.subscriberId ?? null);
  if (subscriberId === null && email !== undefined) {
    // An e-mail answered with no cards: the subscriber is whoever we last saw with that e-mail.
    subscriberId = (await findSubscriberIdByEmail(deps.db, email)) ?? null;
  }
  const writer =
    deps.writer ?? directWriter(deps.db, deps.tokens, { changeEvents: deps.changeEvents ?? false });
  // The answer's wait for, and part in, a group commit (src/sync/group-commit.ts).
  // Its change events carry this span's context: their deliveries' spans link back to it.
  const applied = await tracing().inSpan(
    'db.write_cards',
    { attributes: { 'cards_sync.cards': cards.length } },
    (span) =>
      writer.apply({
        subscriberId,
        email,
        cards,
        run,
        spanContext: tracing().contextText(span.context()),
      }),
  );
  if (applied.status === 'superseded') {
    return { ...applied, errorCode: 'superseded', errorMessage: SUPERSEDED, retryable: false };
  }
  return { ...applied, retryable: false };
}
