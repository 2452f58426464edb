import type { Db } from '../../db/client.js';
import { isConnectionError, rootCause } from '../../db/errors.js';
import type { CardTokens } from '../tokens/index.js';
import { type ActiveSpan, tracing } from '../tracing/index.js';
import { applyCardsBatch, CommittedUnreadError, type WriteOptions } from './apply-cards.js';
import { type AppliedCards, type CardsToApply, lockKey } from './cards-to-apply.js';

/** Writes validated answers; resolves once the answer's rows are committed. */
export interface CardWriter {
  apply(item: CardsToApply): Promise<AppliedCards>;
}

/** Writes each answer in a transaction of its own. */
export function directWriter(db: Db, tokens: CardTokens, options: WriteOptions = {}): CardWriter {
  return { apply: async (item) => (await applyCardsBatch(db, tokens, [item], options))[0]! };
}

/** Options of {@link createGroupCommitter}. */
export interface GroupCommitOptions extends WriteOptions {
  /** Most answers combined in one transaction. Default 64. */
  maxBatch?: number;
  /** Most cards in one transaction; a single larger answer still goes alone. Default 20000. */
  maxCards?: number;
  /** Transactions in flight at once (each holds one pooled connection). Default 4. */
  maxInFlight?: number;
  /**
   * Told about every batch once its answers are settled: how many it held, how long it took, and
   * whether it failed as a whole and its answers were then written one by one.
   */
  onBatch?: (size: number, durationMs: number, fellBack: boolean) => void;
}

interface Pending {
  item: CardsToApply;
  /** The caller's span while tracing is on: the batch's transaction is traced under it. */
  span: ActiveSpan | undefined;
  resolve: (result: AppliedCards) => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit: answers of concurrently running syncs are combined into one transaction (a
 * handful of statements for the whole batch instead of a dozen per answer). Each caller's promise
 * settles only after its own rows are committed. A batch starts as soon as a transaction slot is
 * free, so an idle process adds no delay; under load, answers gather while the previous batch
 * commits. When a batch fails for any reason but a lost connection, its answers are retried one
 * by one, so one bad answer never fails another.
 *
 * Two answers for the same subscriber, e-mail or card never share a batch or run in two batches
 * at once: the second waits for the next one.
 */
export function createGroupCommitter(
  db: Db,
  tokens: CardTokens,
  options: GroupCommitOptions = {},
): CardWriter {
  const maxBatch = options.maxBatch ?? 64;
  const maxCards = options.maxCards ?? 20_000;
  const maxInFlight = options.maxInFlight ?? 4;
  const writeOptions: WriteOptions = {
    ...(options.policy ? { policy: options.policy } : {}),
    changeEvents: options.changeEvents ?? false,
  };
  const pending: Pending[] = [];
  const busy = new Set<string>();
  let inFlight = 0;
  let scheduled = false;

  const keysOf = (item: CardsToApply): string[] => [
    `s:${lockKey(item)}`,
    ...(item.email !== undefined ? [`e:${item.email.toLowerCase()}`] : []),
    ...item.cards.map((c) => `c:${c.id}`),
  ];

  function take(): { batch: Pending[]; keys: string[] } {
    const batch: Pending[] = [];
    const keys: string[] = [];
    let cards = 0;
    for (let i = 0; i < pending.length && batch.length < maxBatch; ) {
      const p = pending[i]!;
      const own = keysOf(p.item);
      const tooBig = batch.length > 0 && cards + p.item.cards.length > maxCards;
      if (tooBig || own.some((k) => busy.has(k))) {
        i++;
        continue;
      }
      for (const k of own) busy.add(k);
      keys.push(...own);
      cards += p.item.cards.length;
      batch.push(p);
      pending.splice(i, 1);
    }
    return { batch, keys };
  }

  /**
   * One batch's transaction, traced as a child of its first traced answer's span and linked to the
   * other traced ones' (a span has one parent); each traced answer's span is told the batch size.
   * The transaction's queries make spans of their own only when the answer that opened the batch
   * is traced. A batch of ~16 answers holds a sampled one about 80% of the time at 10% sampling;
   * with its dozen query spans (the statements' text, ~20 KB) each time, a kept sync cost about
   * three times what it costs at 100% (docs/tracing.md, "What it costs"). So at 10% the queries
   * show in one batch in ten, and at 100% in every one.
   */
  function traced(batch: Pending[]): Promise<void> {
    const [first, ...rest] = batch.flatMap((p) => p.span ?? []);
    if (first === undefined) return commit(batch);
    for (const span of [first, ...rest]) span.set({ 'cards_sync.batch_size': batch.length });
    const parent = first.context();
    const links = rest.flatMap((span) => span.context() ?? []);
    return tracing().inSpan(
      'db.group_commit',
      {
        attributes: { 'cards_sync.batch_size': batch.length },
        ...(parent ? { parent } : {}),
        links,
        quiet: batch[0]!.span === undefined,
      },
      () => commit(batch),
    );
  }

  async function commit(batch: Pending[]): Promise<void> {
    const started = performance.now();
    let results: AppliedCards[];
    try {
      results = await applyCardsBatch(
        db,
        tokens,
        batch.map((p) => p.item),
        writeOptions,
      );
    } catch (error) {
      // A lost connection fails every answer alike; a committed batch must not be written again.
      if (
        batch.length === 1 ||
        isConnectionError(rootCause(error).code) ||
        error instanceof CommittedUnreadError
      ) {
        for (const p of batch) p.reject(error);
        return;
      }
      // Find the bad one: each answer alone, so the others still land.
      for (const p of batch) {
        await applyCardsBatch(db, tokens, [p.item], writeOptions).then((r) => p.resolve(r[0]!), p.reject);
      }
      options.onBatch?.(batch.length, performance.now() - started, true);
      return;
    }
    for (const [i, p] of batch.entries()) p.resolve(results[i]!);
    options.onBatch?.(batch.length, performance.now() - started, false);
  }

  function pump(): void {
    scheduled = false;
    while (inFlight < maxInFlight && pending.length > 0) {
      const { batch, keys } = take();
      if (batch.length === 0) return;
      inFlight++;
      // commit() settles every answer itself; nothing is left to reject here.
      void traced(batch)
        .catch(() => {})
        .finally(() => {
          for (const k of keys) busy.delete(k);
          inFlight--;
          schedule();
        });
    }
  }

  function schedule(): void {
    if (scheduled) return;
    scheduled = true;
    // One turn of the event loop lets answers that arrive together share the batch. The pump
    // serves every caller, so it runs in no trace: otherwise the batches it starts would carry on
    // in the trace of whichever job's answer (or traced batch) happened to schedule it, and a batch
    // of untraced answers would run its queries under that job's span. A batch with traced answers
    // is traced under their spans instead (traced()).
    setImmediate(() => tracing().detached(pump));
  }

  return {
    apply(item) {
      return new Promise<AppliedCards>((resolve, reject) => {
        pending.push({ item, span: tracing().current(), resolve, reject });
        schedule();
      });
    },
  };
}
