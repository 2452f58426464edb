import type pg from 'pg';
import { type EventCounts, writeChangeEvents } from '../events/index.js';
import type { ChangeKind, SyncStatus, SyncTrigger } from '../schema/index.js';
import type { CardOwner } from './batch-read.js';
import { WRITE_BATCH } from './batch-write-sql.js';
import type { CardToWrite } from './cards.js';
import { allInOrder } from './pipeline.js';

// The write path of every sync, as two round trips per batch of answers: (1) begin, lock, read
// (batch-read.ts); (2) one statement that writes everything, pipelined with the few that may follow
// it and the commit (apply-cards.ts). Each round trip costs a turn of a busy worker's event loop,
// so their number, not the rows, sets a sync's latency (the benchmark's profile: ten statements a
// batch took ~1 ms each, whatever they did). The functions here send their queries before they
// first wait, so that queries issued one after another share the round trip.

/** One `sync_runs` row of the batch (counts as planned; `removed` is counted by the write). */
export interface RunRow {
  subscriberId: number | null;
  email: string | null;
  trigger: SyncTrigger;
  jobId: string | null;
  refreshRunId: number | null;
  startedAt: Date;
  status: SyncStatus;
  cardsSeen: number;
  inserted: number;
  updated: number;
  unchanged: number;
  restored: number;
  errorCode: string | null;
  errorMessage: string | null;
}

/** A history row known before writing; removals are added by the write itself. */
export interface KnownChange {
  cardId: number;
  subscriberId: number;
  change: ChangeKind;
  changedFields: string[] | null;
  /** The earlier values of the changed fields (and a restore's `removed_at`); never the token. */
  previous: Record<string, unknown> | null;
  /** Why a card was removed: `moved` when another subscriber's answer took it. */
  reason: string | null;
  /** Index of the run (in `runs`) the change belongs to. */
  run: number;
}

/**
 * A subscriber's refresh schedule after a successful sync, as the policy planned it
 * (src/freshness/schedule.ts `afterSuccess`, whose `ScheduleUpdate` this shape fits).
 */
interface ScheduleToWrite {
  /** `change_observations`, or null to keep none. */
  observations: readonly number[] | null;
  ratePerDay: number;
  /** `stale_rate_per_day`: the rate the estimate reads for it; null: none (it reads `ratePerDay`). */
  staleRatePerDay: number | null;
  /** `next_refresh_at`, ms since the epoch. */
  nextRefreshAt: number;
}

/** A successful sync: what its `subscribers` row becomes. */
interface Success {
  subscriberId: number;
  activeCards: number;
  /**
   * The answer's digest, or null for an answer identical to what is stored (its digest matched):
   * then `cards_digest` and `active_cards` keep what the row holds when the write reaches it,
   * which is null and the recount if another subscriber's sync took one of its cards meanwhile.
   */
  digest: string | null;
  /** Its refresh schedule after this sync. */
  schedule: ScheduleToWrite;
}

export interface BatchWrite {
  now: Date;
  /** `CHANGE_EVENTS=on`: the batch's changes are also written as change events, in its transaction. */
  changeEvents: boolean;
  /** New, changed and restored cards, tokens in stored form; ids distinct. */
  upserts: readonly CardToWrite[];
  /** Cards stored for the first time: the index of their run (in `runs`), which added them. */
  addedBy: ReadonlyMap<number, number>;
  /** Vanished upstream: marked removed while still owned by that subscriber. */
  removals: readonly CardOwner[];
  runs: readonly RunRow[];
  changes: readonly KnownChange[];
  /** Successful syncs; subscribers distinct. E-mails are learned afterwards (`learnEmails`). */
  successes: readonly Success[];
  /** While tracing is on: each subscriber's sync's trace context, for its events (db/events/outbox.ts). */
  spanContexts?: ReadonlyMap<number, string>;
}

/**
 * Writes a batch in one statement: cards upserted (ascending ids, so concurrent batches lock rows
 * in one order) and removed (an identical card is not written at all), one `sync_runs` row per run, history, and `subscribers`.
 * With change events on, a batch that may change a card sends its events right behind it
 * (db/events/outbox.ts), in the same round trip; an unchanged one, or any with events off, sends
 * nothing more.
 * Returns the run ids in the order of `runs`, the cards really marked removed, and how many change
 * events of each type the batch wrote (to be counted once the commit is known).
 */
export async function writeBatch(
  client: pg.PoolClient,
  w: BatchWrite,
): Promise<{ runIds: number[]; removed: CardOwner[]; events: EventCounts }> {
  const cards = [...w.upserts].sort((a, b) => a.id - b.id);
  const of = <T, V>(rows: readonly T[], pick: (row: T) => V) => rows.map(pick);
  const writing = client.query<{ kind: 'run' | 'removed'; id: number; ref: number }>({
    name: 'cards-sync-write-batch',
    text: WRITE_BATCH,
    values: [
      w.now,
      of(cards, (c) => c.id),
      of(cards, (c) => c.subscriberId),
      of(cards, (c) => c.token.value),
      of(cards, (c) => c.binNumber),
      of(cards, (c) => c.cardFamily),
      of(cards, (c) => c.cardBankCode),
      of(cards, (c) => c.cardBankName),
      of(cards, (c) => c.companyId),
      // As a Date: milliseconds, like the comparison in reconcile (Postgres would round
      // nanoseconds to microseconds and the two would never agree).
      of(cards, (c) => new Date(c.createDate)),
      of(w.successes, (s) => s.digest),
      of(w.removals, (r) => r.id),
      of(w.removals, (r) => r.subscriberId),
      of(w.runs, (r) => r.subscriberId),
      of(w.runs, (r) => r.email),
      of(w.runs, (r) => r.trigger),
      of(w.runs, (r) => r.jobId),
      of(w.runs, (r) => r.refreshRunId),
      of(w.runs, (r) => r.startedAt),
      of(w.runs, (r) => r.status),
      of(w.runs, (r) => r.cardsSeen),
      of(w.runs, (r) => r.inserted),
      of(w.runs, (r) => r.updated),
      of(w.runs, (r) => r.unchanged),
      of(w.runs, (r) => r.restored),
      of(w.runs, (r) => r.errorCode),
      of(w.runs, (r) => r.errorMessage),
      of(w.changes, (c) => c.cardId),
      of(w.changes, (c) => c.subscriberId),
      of(w.changes, (c) => c.change),
      // Comma-joined: unnest would flatten an array of arrays.
      of(w.changes, (c) => c.changedFields?.join(',') ?? null),
      of(w.changes, (c) => c.run + 1),
      of(w.successes, (s) => s.subscriberId),
      of(w.successes, (s) => s.activeCards),
      of(cards, (c) => c.token.fingerprint),
      // As JSON text: unnest cannot take an array of jsonb values from a parameter as they are.
      of(w.changes, (c) => (c.previous === null ? null : JSON.stringify(c.previous))),
      of(w.changes, (c) => c.reason),
      of(w.successes, (s) => s.schedule.ratePerDay),
      of(w.successes, (s) => new Date(s.schedule.nextRefreshAt)),
      of(w.successes, (s) =>
        s.schedule.observations === null ? null : `{${s.schedule.observations.join(',')}}`,
      ),
      of(cards, (c) => {
        const run = w.addedBy.get(c.id);
        return run === undefined ? null : run + 1;
      }),
      of(w.successes, (s) => s.schedule.staleRatePerDay),
    ],
  });
  const mayChange = w.changeEvents && (cards.length > 0 || w.removals.length > 0 || w.changes.length > 0);
  const [result, events] = await allInOrder([
    writing,
    mayChange
      ? writeChangeEvents(client, {
          subscriberIds: [
            ...cards.map((c) => c.subscriberId),
            ...w.removals.map((r) => r.subscriberId),
            ...w.changes.map((c) => c.subscriberId),
          ],
          at: w.now,
          ...(w.spanContexts ? { spanContexts: w.spanContexts } : {}),
        })
      : Promise.resolve({}),
  ]);
  const runIds = new Array<number>(w.runs.length);
  const removed: CardOwner[] = [];
  for (const row of result.rows) {
    if (row.kind === 'run') runIds[row.ref - 1] = row.id;
    else removed.push({ id: row.id, subscriberId: row.ref });
  }
  if (runIds.some((id) => id === undefined) || result.rows.length - removed.length !== w.runs.length) {
    throw new Error('the batch write did not return one sync_runs id per run');
  }
  return { runIds, removed, events };
}

/**
 * Records the e-mails that lookups by e-mail answered for: an e-mail belongs to one subscriber,
 * so when it moved, the old owner forgets it first.
 */
export async function learnEmails(
  client: pg.PoolClient,
  owners: readonly { email: string; subscriberId: number }[],
): Promise<void> {
  if (owners.length === 0) return;
  const values = [owners.map((o) => o.email), owners.map((o) => o.subscriberId)];
  await allInOrder([
    client.query({
      name: 'cards-sync-forget-emails',
      // By `= any`, not a join with unnest (see the removal in WRITE_BATCH): the index is taken
      // whatever the table's size when the plan was cached.
      text: `update subscribers s set email = null
        where lower(s.email) = any(array(select lower(e) from unnest($1::text[]) e))
          and s.subscriber_id <> ($2::bigint[])[array_position(array(select lower(e) from unnest($1::text[]) e), lower(s.email))]`,
      values,
    }),
    client.query({
      name: 'cards-sync-learn-emails',
      text: `update subscribers s set email = ($1::text[])[array_position($2::bigint[], s.subscriber_id)]
        where s.subscriber_id = any($2::bigint[])
          and s.email is distinct from ($1::text[])[array_position($2::bigint[], s.subscriber_id)]`,
      values,
    }),
  ]);
}
