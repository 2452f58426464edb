import { type Db, poolOf } from '../../db/client.js';
import { eventsCommitted } from '../../db/events/index.js';
import {
  type BatchWrite,
  beginLockAndRead,
  type CardOwner,
  forgetDigestsOfTakenCards,
  learnEmails,
  lockAndReread,
  recountActiveCards,
  resolveClaims,
  sentTogether,
  upsertClaims,
  writeBatch,
} from '../../db/sync/index.js';
import { commit, committedIn, rollback, withClient } from '../../db/transaction.js';
import {
  afterSuccess,
  defaultPolicy,
  evidenceOf,
  type PolicyParams,
  type SubscriberSchedule,
} from '../freshness/index.js';
import type { CardTokens } from '../tokens/index.js';
import { conflictsOf } from './batch-conflicts.js';
import { indexStored, isSuperseded, knownChanges, plan, runRow, toWrite } from './batch-plan.js';
import { type AppliedCards, type CardsToApply, lockKey } from './cards-to-apply.js';
import { answerDigest } from './digest.js';
import { emptyCounts, type ReconcilePlan } from './reconcile.js';

/**
 * The batch was committed, but a reply to one of its statements could not be read: its rows are
 * stored, its results are unknown. Not to be written again answer by answer.
 */
export class CommittedUnreadError extends Error {
  override readonly name = 'CommittedUnreadError';
  constructor(cause: unknown) {
    super('the batch was committed, but a reply to it could not be read', { cause });
  }
}

const DEFAULT_POLICY = defaultPolicy();
const NEVER_SYNCED: SubscriberSchedule = { lastSuccessAt: null, observations: null, ratePerDay: null };

/** Whether an answer differed from the stored copy: a card added, changed, restored or dropped. */
function answerChanged(plan: ReconcilePlan, removals: readonly CardOwner[], subscriberId: number): boolean {
  return (
    plan.inserts.length > 0 ||
    plan.updates.length > 0 ||
    removals.some((r) => r.subscriberId === subscriberId)
  );
}

/** How a write is made, the same for every batch of a process. */
export interface WriteOptions {
  /** The refresh's current plan, which every success schedules its subscriber's next sync by. */
  policy?: () => PolicyParams;
  /**
   * `CHANGE_EVENTS=on`: every change is also written as a change event, in the same transaction.
   * Default false (`off`): no outbox statement is sent at all.
   */
  changeEvents?: boolean;
}

/**
 * Writes several answers in one transaction, under the advisory locks of all their subscribers,
 * in two round trips (see `db/sync/batch-write.ts`): upserts cards (an identical row is not
 * written: its subscriber's last success carries its `last_seen_at`), soft-deletes and restores, writes history, one `sync_runs` row
 * per answer and the `subscribers` rows. The answers must name distinct subscribers, e-mails and
 * card ids (the group committer makes sure of it). An answer fetched before an answer already
 * applied for its subscriber is recorded as `superseded` and not written, so two syncs of one
 * subscriber never interleave, whatever order their fetches end in.
 *
 * Tokens are stored and compared through `tokens` (sealed with CARD_TOKEN_ENCRYPTION=on); a stored
 * token it cannot compare (its key is not in the ring) fails the batch before anything is written.
 *
 * Results come back in the order of `items`; if anything fails, nothing of any of them is written.
 */
export async function applyCardsBatch(
  db: Db,
  tokens: CardTokens,
  items: readonly CardsToApply[],
  options: WriteOptions = {},
): Promise<AppliedCards[]> {
  const policy = options.policy ?? (() => DEFAULT_POLICY);
  // A connection reset between two statements arrives as an 'error' event (createDb's listener
  // keeps it from crashing the process); withClient discards such a client, not reuses it.
  return withClient(poolOf(db), async (client, checkout) => {
    try {
      const digests = items.map((i) => (i.subscriberId === null ? null : answerDigest(i.cards, tokens)));
      const answers = items.flatMap((i, n) =>
        i.subscriberId === null
          ? []
          : [
              {
                subscriberId: i.subscriberId,
                digest: digests[n]!,
                cardIds: i.cards.map((c) => c.id),
                startedAt: i.run.startedAt,
              },
            ],
      );
      const subscriberIds = answers.map((a) => a.subscriberId);
      const read = await beginLockAndRead(client, items.map(lockKey), answers);
      // Cards of subscribers outside the batch are moving here: lock them before planning (rare).
      const ours = new Set(subscriberIds);
      const moving = read.stored.filter((r) => !ours.has(r.subscriberId)).map((r) => r.id);
      if (moving.length > 0) {
        const fresh = await lockAndReread(client, moving);
        const movingIds = new Set(moving);
        read.stored = [...read.stored.filter((r) => !movingIds.has(r.id)), ...fresh];
      }
      // Postgres's clock, never this host's: every host stamps its rows on one clock.
      const now = read.now;
      const stored = indexStored(read);
      const applying = new Set(
        items.flatMap((i) => (i.subscriberId !== null && !isSuperseded(i, stored) ? [i.subscriberId] : [])),
      );
      const planned = items.map((item, n) => plan(item, digests[n] ?? null, stored, tokens, applying));
      const writing = planned.filter((p) => p.plan !== null);
      const conflicts = await conflictsOf(client, writing);

      // A stored card that one answer dropped and another written answer lists has moved: the lister
      // takes it (as if it had synced first), so the rows each part of the write touches stay
      // disjoint. A superseded answer writes nothing, so what it lists takes nothing from anyone.
      const listed = new Set(writing.flatMap((p) => (p.unchanged ? [] : p.item.cards.map((c) => c.id))));
      const removals: CardOwner[] = writing.flatMap((p) =>
        p
          .plan!.removedIds.filter((id) => !listed.has(id))
          .map((id) => ({ id, subscriberId: p.item.subscriberId! })),
      );

      // Everything is worked out before the first query goes out: nothing may throw between them.
      const batch: BatchWrite = {
        now,
        changeEvents: options.changeEvents ?? false,
        upserts: writing.flatMap((p) => [
          ...p.plan!.inserts.map((c) => toWrite(c, undefined, tokens)),
          ...p.plan!.updates.map((u) => toWrite(u.card, stored.byId.get(u.card.id), tokens)),
        ]),
        addedBy: new Map(
          writing.flatMap((p) => p.plan!.inserts.map((c) => [c.id, planned.indexOf(p)] as const)),
        ),
        removals,
        runs: planned.map(runRow),
        changes: planned.flatMap((p, i) =>
          p.plan === null ? [] : knownChanges(p, i, conflicts.opening, conflicts.resolving),
        ),
        // After the sync the subscriber's active cards are exactly the ones the answer lists, but
        // for those in conflict. An answer with conflicts vouches for nothing: '' matches no
        // answer's digest, so its next answer is read in full and its conflicts looked at again.
        successes: writing.map((p) => ({
          subscriberId: p.item.subscriberId!,
          activeCards: p.item.cards.length - p.claims.length,
          digest: p.unchanged ? null : p.claims.length > 0 ? '' : p.digest,
          // The refresh learns from every success whether the stored copy still matched upstream.
          schedule: afterSuccess(
            {
              ...(read.schedules.get(p.item.subscriberId!) ?? NEVER_SYNCED),
              evidence: evidenceOf(p.item.cards, now.getTime()),
            },
            !p.unchanged && answerChanged(p.plan!, removals, p.item.subscriberId!),
            now.getTime(),
            policy(),
          ),
        })),
        spanContexts: new Map(
          writing.flatMap((p) =>
            p.item.spanContext ? [[p.item.subscriberId!, p.item.spanContext] as const] : [],
          ),
        ),
      };
      const emailOwners = writing.flatMap((p) =>
        p.item.email !== undefined ? [{ email: p.item.email, subscriberId: p.item.subscriberId! }] : [],
      );
      const formerOwners = writing.flatMap((p) =>
        p.plan!.updates.flatMap((u) =>
          u.previousSubscriberId !== undefined ? [u.previousSubscriberId] : [],
        ),
      );
      // The cards each new digest vouches for, to check after the write (forgetDigestsOfTakenCards).
      const vouched: CardOwner[] = writing.flatMap((p) =>
        p.unchanged || p.claims.length > 0
          ? []
          : p.item.cards.map((c) => ({ id: c.id, subscriberId: p.item.subscriberId! })),
      );
      // One round trip: the write, the e-mails, the recount, the digests' check and the commit are
      // sent together. If a statement fails, the ones behind it fail and the commit rolls back; the
      // first error is thrown.
      // Answers read in full settle their subscribers' conflicts (an unchanged answer had none).
      const claimants = writing.flatMap((p) => (p.unchanged ? [] : [p.item.subscriberId!]));
      const claims = writing.flatMap((p) => p.claims);
      const [written, emails, recount, checked, opened, resolved, committed] = await Promise.allSettled(
        sentTogether(
          client,
          () =>
            [
              writeBatch(client, batch),
              // After the cards, as a sync always did: taking an e-mail from its old owner locks that
              // owner's row, and doing it first would lock in another order than a sync of that owner.
              learnEmails(client, emailOwners),
              recountActiveCards(client, formerOwners),
              forgetDigestsOfTakenCards(client, vouched),
              claims.length > 0 ? upsertClaims(client, claims, now) : Promise.resolve(undefined),
              claimants.length > 0
                ? resolveClaims(client, claimants, claims, now)
                : Promise.resolve(undefined),
              commit(client),
            ] as const,
        ),
      );
      const failure = [written, emails, recount, checked, opened, resolved, committed].find(
        (s) => s.status === 'rejected',
      );
      if (committed.status === 'fulfilled' && committedIn(committed.value) && failure) {
        // The server committed, but what it answered could not be read (a reply the client
        // refuses). Writing the answers again would record them twice.
        throw new CommittedUnreadError(failure.reason);
      }
      if (failure) throw failure.reason;
      if (written.status !== 'fulfilled' || committed.status !== 'fulfilled') throw new Error('unreachable');
      if (!committedIn(committed.value))
        throw new Error('the batch transaction was rolled back, not committed');
      const { runIds, removed, events } = written.value;
      eventsCommitted(events);

      // Count only what was really marked: a card may have moved to another subscriber meanwhile.
      const removedBy = new Map<number, number>();
      for (const r of removed) removedBy.set(r.subscriberId, (removedBy.get(r.subscriberId) ?? 0) + 1);
      return planned.map((p, i) => {
        const counts = p.plan === null ? { ...emptyCounts(), cardsSeen: runRow(p).cardsSeen } : p.plan.counts;
        if (p.plan !== null) counts.removed = removedBy.get(p.item.subscriberId!) ?? 0;
        return {
          status: p.superseded ? 'superseded' : 'succeeded',
          subscriberId: p.item.subscriberId,
          syncRunId: runIds[i]!,
          counts,
        };
      });
    } catch (error) {
      // Not when the transaction is over already (a pipelined commit ended it, or rolled it back).
      // A connection that could not even roll back is thrown away, not returned to the pool.
      if (client.getTransactionStatus() !== 'I')
        await rollback(client).catch((e: Error) => checkout.discard(e));
      throw error;
    }
  });
}
