import { eq, inArray } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { savedCardChanges, savedCards, subscribers, syncRuns } from '../../db/schema/index.js';
import { applyCardsBatch, CommittedUnreadError } from '../../src/sync/apply-cards.js';
import { createGroupCommitter, directWriter } from '../../src/sync/group-commit.js';
import { answerOf, makeCard, testTokens } from '../support/fixtures.js';
import { useTestDatabase } from '../support/helpers.js';

// The group committer against real Postgres: answers handed over in the same turn of the event
// loop share one transaction, and each lands exactly as it would alone.

const database = useTestDatabase();

const answer = answerOf;

function recordingCommitter(options: { maxInFlight?: number } = {}) {
  const batches: { size: number; fellBack: boolean }[] = [];
  const writer = createGroupCommitter(database.handle.db, testTokens, {
    ...options,
    onBatch: (size, _ms, fellBack) => batches.push({ size, fellBack }),
  });
  return { writer, batches };
}

const cardsOf = (ids: number[]) =>
  database.handle.db
    .select()
    .from(savedCards)
    .where(inArray(savedCards.subscriberId, ids))
    .orderBy(savedCards.id);
const changesOf = (ids: number[]) =>
  database.handle.db
    .select()
    .from(savedCardChanges)
    .where(inArray(savedCardChanges.subscriberId, ids))
    .orderBy(savedCardChanges.id);

/** Runs `body` while Postgres refuses every card of `subscriberId` (a trigger), then lifts it. */
async function whileRefusing(subscriberId: number, body: () => Promise<void>): Promise<void> {
  await database.handle.pool.query(`
    create function refuse_subscriber_${subscriberId}() returns trigger language plpgsql as $$
    begin
      if new.subscriber_id = ${subscriberId} then raise exception 'refused by the test trigger'; end if;
      return new;
    end $$;
    create trigger refuse_${subscriberId} before insert on saved_cards
      for each row execute function refuse_subscriber_${subscriberId}();`);
  try {
    await body();
  } finally {
    await database.handle.pool.query(
      `drop trigger refuse_${subscriberId} on saved_cards; drop function refuse_subscriber_${subscriberId}()`,
    );
  }
}

describe('group commit', () => {
  it('writes concurrent answers in shared transactions, each exactly as if it were alone', async () => {
    const ids = Array.from({ length: 40 }, (_, i) => 2001 + i);
    const answers = ids.map((id) => answer(id, [makeCard(id), makeCard(id), makeCard(id)]));
    const { writer, batches } = recordingCommitter({ maxInFlight: 1 });
    const results = await Promise.all(answers.map((a) => writer.apply(a)));

    // Fewer transactions than answers, and every answer in exactly one of them.
    expect(batches.length).toBeLessThan(ids.length);
    expect(batches.reduce((n, b) => n + b.size, 0)).toBe(ids.length);
    expect(batches.some((b) => b.fellBack)).toBe(false);

    for (const [i, r] of results.entries()) {
      expect(r).toMatchObject({ status: 'succeeded', subscriberId: ids[i], counts: { inserted: 3 } });
    }
    // Each result names its own run, and that run holds its own subscriber and counts.
    const runs = await database.handle.db
      .select()
      .from(syncRuns)
      .where(
        inArray(
          syncRuns.id,
          results.map((r) => r.syncRunId),
        ),
      );
    expect(runs).toHaveLength(ids.length);
    for (const r of results) {
      const run = runs.find((x) => x.id === r.syncRunId)!;
      expect(run).toMatchObject({
        subscriberId: r.subscriberId,
        status: 'succeeded',
        inserted: 3,
        jobId: `job-${r.subscriberId}`,
      });
    }
    const cards = await cardsOf(ids);
    expect(cards.map((c) => c.id).sort()).toEqual(answers.flatMap((a) => a.cards.map((c) => c.id)).sort());
    const history = await changesOf(ids);
    expect(history).toHaveLength(ids.length * 3);
    for (const h of history) {
      expect(h.change).toBe('added');
      expect(results.find((r) => r.subscriberId === h.subscriberId)!.syncRunId).toBe(h.syncRunId);
    }
    const subs = await database.handle.db
      .select()
      .from(subscribers)
      .where(inArray(subscribers.subscriberId, ids));
    expect(subs.map((s) => s.activeCards)).toEqual(ids.map(() => 3));

    // The same answers again: nothing is rewritten, every card counted unchanged.
    const again = await Promise.all(
      answers.map((a) => writer.apply({ ...a, run: { ...a.run, startedAt: new Date() } })),
    );
    for (const r of again) expect(r.counts).toMatchObject({ unchanged: 3, inserted: 0, updated: 0 });
    expect(await changesOf(ids)).toHaveLength(ids.length * 3);
  });

  it('one answer the database refuses fails alone; the rest of its batch lands', async () => {
    await whileRefusing(2666, async () => {
      const ids = [2660, 2661, 2662, 2663, 2664, 2665, 2666, 2667, 2668, 2669];
      const { writer, batches } = recordingCommitter();
      const settled = await Promise.allSettled(ids.map((id) => writer.apply(answer(id, [makeCard(id)]))));

      // All ten went in one transaction, which failed and was redone one by one.
      expect(batches).toEqual([{ size: 10, fellBack: true }]);
      for (const [i, s] of settled.entries()) {
        if (ids[i] === 2666) {
          expect(s.status).toBe('rejected');
          expect(String((s as PromiseRejectedResult).reason)).toMatch(/refused by the test trigger/);
        } else {
          expect(s).toMatchObject({
            status: 'fulfilled',
            value: { status: 'succeeded', counts: { inserted: 1 } },
          });
        }
      }
      const cards = await cardsOf(ids);
      expect(new Set(cards.map((c) => c.subscriberId))).toEqual(new Set(ids.filter((id) => id !== 2666)));
      // Exactly one run each for the nine: the failed batch left nothing behind.
      const runs = await database.handle.db
        .select()
        .from(syncRuns)
        .where(inArray(syncRuns.subscriberId, ids));
      expect(runs.map((r) => r.subscriberId).sort()).toEqual(ids.filter((id) => id !== 2666));
    });
  });

  it('a refused write reports its own error, not that of the statements pipelined behind it, and leaves nothing', async () => {
    await whileRefusing(2676, async () => {
      // By e-mail: the e-mail statements and the commit are sent behind the write that fails.
      const email = 'pipelined-2676@example.test';
      await expect(
        applyCardsBatch(database.handle.db, testTokens, [
          answer(2676, [makeCard(2676)], {
            email,
            run: { email, trigger: 'manual', jobId: 'job-2676', refreshRunId: null, startedAt: new Date() },
          }),
        ]),
      ).rejects.toThrow(/refused by the test trigger/);
      expect(await cardsOf([2676])).toEqual([]);
      const runs = await database.handle.db.select().from(syncRuns).where(eq(syncRuns.subscriberId, 2676));
      expect(runs).toEqual([]);
      const known = await database.handle.db
        .select()
        .from(subscribers)
        .where(eq(subscribers.subscriberId, 2676));
      expect(known).toEqual([]);
    });
    // Every connection the pool hands out afterwards writes normally.
    const again = await Promise.all(
      [2677, 2678, 2679].map((id) =>
        applyCardsBatch(database.handle.db, testTokens, [answer(id, [makeCard(id)])]),
      ),
    );
    expect(again.map((r) => r[0]!.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    expect((await cardsOf([2677, 2678, 2679])).length).toBe(3);
  });

  it('a batch committed whose reply cannot be read is reported failed once, not written again answer by answer', async () => {
    // Run ids past 2^53: the server commits, the client refuses the ids it gets back.
    const { rows } = await database.handle.pool.query<{ last: string }>(
      `select coalesce(max(id), 0)::text as last from sync_runs`,
    );
    await database.handle.pool.query(`select setval('sync_runs_id_seq', 9007199254740993)::text`);
    try {
      const ids = [2690, 2691, 2692];
      const { writer, batches } = recordingCommitter();
      const settled = await Promise.allSettled(ids.map((id) => writer.apply(answer(id, [makeCard(id)]))));
      expect(batches).toEqual([]);
      for (const s of settled) {
        expect(s.status).toBe('rejected');
        expect((s as PromiseRejectedResult).reason).toBeInstanceOf(CommittedUnreadError);
      }
      // Written once: one card and one run each, as committed by the one batch.
      const { rows: cards } = await database.handle.pool.query<{ subscriber_id: string }>(
        'select subscriber_id::text from saved_cards where subscriber_id = any($1::bigint[]) order by id',
        [ids],
      );
      expect(cards.map((c) => Number(c.subscriber_id))).toEqual(ids);
      const { rows: runs } = await database.handle.pool.query<{ subscriber_id: string }>(
        `select subscriber_id::text from sync_runs where subscriber_id = any($1::bigint[]) order by subscriber_id`,
        [ids],
      );
      expect(runs.map((r) => Number(r.subscriber_id))).toEqual(ids);
    } finally {
      await database.handle.pool.query(
        `delete from saved_card_change_log where sync_run_id > 9007199254740991;
         update saved_cards set added_sync_run_id = null where added_sync_run_id > 9007199254740991;
         delete from sync_runs where id > 9007199254740991`,
      );
      await database.handle.pool.query(`select setval('sync_runs_id_seq', $1::bigint + 1, false)::text`, [
        rows[0]!.last,
      ]);
    }
  });

  it('two answers of one subscriber (by id and by e-mail) never share a batch', async () => {
    const cards = [makeCard(2700), makeCard(2700)];
    const startedAt = new Date();
    const { writer, batches } = recordingCommitter();
    const [byId, byEmail] = await Promise.all([
      writer.apply(
        answer(2700, cards, {
          run: { email: null, trigger: 'manual', jobId: 'a', refreshRunId: null, startedAt },
        }),
      ),
      writer.apply(
        answer(2700, cards, {
          email: 'Ayse+2700@Example.com',
          run: {
            email: 'Ayse+2700@Example.com',
            trigger: 'manual',
            jobId: 'b',
            refreshRunId: null,
            startedAt,
          },
        }),
      ),
    ]);
    expect(batches.map((b) => b.size)).toEqual([1, 1]);
    expect(byId.counts).toMatchObject({ inserted: 2 });
    expect(byEmail.counts).toMatchObject({ unchanged: 2, inserted: 0 });
    expect(await changesOf([2700])).toHaveLength(2);
    const [sub] = await database.handle.db
      .select()
      .from(subscribers)
      .where(eq(subscribers.subscriberId, 2700));
    expect(sub).toMatchObject({ email: 'Ayse+2700@Example.com', activeCards: 2 });
  });

  it('a card moving between two subscribers of one batch: the new owner has it, the old one a removal', async () => {
    const moving = makeCard(2800);
    const staying = makeCard(2800);
    await directWriter(database.handle.db, testTokens).apply(answer(2800, [moving, staying]));

    const { writer, batches } = recordingCommitter();
    const [old, next] = await Promise.all([
      writer.apply(answer(2800, [staying])),
      writer.apply(answer(2801, [{ ...moving, subscriberId: 2801 }])),
    ]);
    expect(batches).toEqual([{ size: 2, fellBack: false }]);
    // As if the new owner had synced first: the old one finds nothing left to remove.
    expect(old.counts).toMatchObject({ unchanged: 1, removed: 0 });
    expect(next.counts).toMatchObject({ updated: 1 });
    const [row] = await database.handle.db.select().from(savedCards).where(eq(savedCards.id, moving.id));
    expect(row).toMatchObject({ subscriberId: 2801, removedAt: null });
    expect((await changesOf([2800])).map((c) => [c.cardId, c.change])).toEqual([
      [moving.id, 'added'],
      [staying.id, 'added'],
      [moving.id, 'removed'],
    ]);
    const subs = await database.handle.db
      .select()
      .from(subscribers)
      .where(inArray(subscribers.subscriberId, [2800, 2801]))
      .orderBy(subscribers.subscriberId);
    expect(subs.map((s) => s.activeCards)).toEqual([1, 1]);
  });

  it('an answer fetched before one already applied is recorded superseded, even in a batch', async () => {
    const early = new Date(Date.now() - 60_000);
    await directWriter(database.handle.db, testTokens).apply(answer(2900, [makeCard(2900)]));
    const { writer } = recordingCommitter();
    const [stale, fresh] = await Promise.all([
      writer.apply(
        answer(2900, [], {
          run: { email: null, trigger: 'manual', jobId: 's', refreshRunId: null, startedAt: early },
        }),
      ),
      writer.apply(answer(2901, [makeCard(2901)])),
    ]);
    expect(stale).toMatchObject({ status: 'superseded', counts: { removed: 0 } });
    expect(fresh).toMatchObject({ status: 'succeeded', counts: { inserted: 1 } });
    const cards = await cardsOf([2900]);
    expect(cards.every((c) => c.removedAt === null)).toBe(true);
  });

  it('a superseded answer that still lists a card takes nothing from the answer that dropped it', async () => {
    const x = makeCard(3000);
    const keep = makeCard(3000);
    await directWriter(database.handle.db, testTokens).apply(answer(3000, [x, keep]));
    await directWriter(database.handle.db, testTokens).apply(answer(3001, [makeCard(3001)]));
    const stale = new Date(Date.now() - 60_000);
    const [dropped, superseded] = await applyCardsBatch(database.handle.db, testTokens, [
      answer(3000, [keep]),
      answer(3001, [{ ...x, subscriberId: 3001 }], {
        run: { email: null, trigger: 'manual', jobId: 'stale', refreshRunId: null, startedAt: stale },
      }),
    ]);
    expect(superseded!.status).toBe('superseded');
    expect(dropped!.counts).toMatchObject({ removed: 1, unchanged: 1 });
    const [row] = await database.handle.db.select().from(savedCards).where(eq(savedCards.id, x.id));
    expect(row).toMatchObject({ subscriberId: 3000, removedAt: expect.any(Date) });
    const [sub] = await database.handle.db
      .select()
      .from(subscribers)
      .where(eq(subscribers.subscriberId, 3000));
    expect(sub!.activeCards).toBe(1);
  });

  it('a createDate finer than milliseconds is not taken for a change at every sync', async () => {
    const c = makeCard(3100, { createDate: '2021-02-28T14:01:35.0019996+03:00' });
    const writer = directWriter(database.handle.db, testTokens);
    await writer.apply(answer(3100, [c]));
    const again = await writer.apply(answer(3100, [c]));
    expect(again.counts).toMatchObject({ unchanged: 1, updated: 0 });
    expect(await changesOf([3100])).toHaveLength(1);
  });
});
