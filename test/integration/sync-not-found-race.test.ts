import { asc, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, type DbHandle } from '../../db/client.js';
import { savedCardChanges, savedCards, subscribers, syncRuns } from '../../db/schema/index.js';
import type { SavedCard } from '../../src/api/index.js';
import { type ApiClient, createApiClient } from '../../src/api/index.js';
import { type SyncResult, syncSubscriber } from '../../src/sync/index.js';
import { API_KEY, makeCard, ok, testTokens, useScriptedApi } from '../support/fixtures.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';
import { waitFor } from '../support/queue-helpers.js';

// The 404 policy raced on real Postgres: not_found syncs of one subscriber (some of them retries of
// one job) against a successful sync of it, all at once, round after round. Whatever order the
// advisory lock lets them through in, the result must be the one of running them one by one in
// that order, which `sync_runs` ids record (every sync writes its run while holding the lock).

const database = useTestDatabase();
const upstream = useScriptedApi();
const { logger } = captureLogger('info');
let api: ApiClient;
let handle: DbHandle;

beforeAll(() => {
  api = createApiClient({ baseUrl: upstream.url, apiKey: API_KEY, pathStyle: 'standard', timeoutMs: 5000 });
  // Enough connections for every sync of a round to hold one at once.
  handle = createDb(database.url, { max: 40 });
});
afterAll(async () => {
  await api.close();
  await handle.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const jitter = (max: number) => sleep(Math.floor(Math.random() * max));

function sync(subscriberId: number, goneAfterNotFound: number, jobId?: string): Promise<SyncResult> {
  return syncSubscriber(
    { db: handle.db, api, logger, tokens: testTokens, goneAfterNotFound },
    { target: { subscriberId }, trigger: 'manual', ...(jobId ? { jobId } : {}) },
  );
}

/** What running the recorded syncs one by one, in `sync_runs` id order, must have left. */
function replay(
  runs: (typeof syncRuns.$inferSelect)[],
  threshold: number,
  cards: number,
): {
  count: number;
  active: number;
  uncounted: number;
  removedBy: Map<number, number>;
  restoredBy: Map<number, number>;
} {
  let count = 0;
  let uncounted = 0;
  let active = 0;
  let newest = 0;
  const jobsSeen = new Set<string>();
  const removedBy = new Map<number, number>();
  const restoredBy = new Map<number, number>();
  for (const run of runs) {
    if (run.status === 'succeeded') {
      restoredBy.set(run.id, active === 0 && newest > 0 ? cards : 0);
      count = 0;
      active = cards;
      newest = Math.max(newest, run.startedAt.getTime());
    } else if (run.status === 'not_found') {
      const stale = newest > run.startedAt.getTime();
      const retry = run.jobId !== null && jobsSeen.has(run.jobId);
      if (run.jobId !== null) jobsSeen.add(run.jobId);
      const counted = !stale && !retry;
      if (counted) count++;
      else uncounted++;
      const remove = counted && threshold > 0 && count >= threshold;
      removedBy.set(run.id, remove ? active : 0);
      if (remove) active = 0;
    } else if (run.status !== 'superseded') {
      throw new Error(`unexpected ${run.status} run: ${run.errorCode} ${run.errorMessage}`);
    }
  }
  return { count, active, uncounted, removedBy, restoredBy };
}

interface Round {
  subscriberId: number;
  threshold: number;
  notFounds: number;
  /** Of the not_found syncs, how many reuse one of a few job ids (a retried job). */
  retried: number;
}

async function runRound({ subscriberId, threshold, notFounds, retried }: Round) {
  const cards: SavedCard[] = Array.from({ length: 4 }, () => makeCard(subscriberId));
  upstream.script.set(`id:${subscriberId}`, ok(cards));
  expect(await sync(subscriberId, threshold)).toMatchObject({ status: 'succeeded' });

  // notFounds 404s and one 200, handed out in whatever order the requests arrive, each late by a
  // few milliseconds so fetches end in another order than they began.
  let successes = 1;
  upstream.script.set(`id:${subscriberId}`, (n) => {
    // n counts this subscriber's requests: 1 was the first sync, 2..notFounds + 2 are this round's.
    const pick = successes > 0 && Math.random() < 1 / (notFounds + 3 - n);
    if (pick) successes--;
    const delayMs = Math.floor(Math.random() * 25);
    return pick ? { ...ok(cards), delayMs } : { status: 404, delayMs };
  });
  const requests = Array.from({ length: notFounds + 1 }, async (_, i) => {
    await jitter(15);
    const jobId =
      i < retried ? `round-${subscriberId}-job-${i % 3}` : i % 2 ? `job-${subscriberId}-${i}` : undefined;
    return sync(subscriberId, threshold, jobId);
  });
  const results = await Promise.all(requests);
  // A retry of a job that already counted, once everything has settled.
  upstream.script.set(`id:${subscriberId}`, { status: 404 });
  results.push(await sync(subscriberId, threshold, `round-${subscriberId}-job-0`));

  // No deadlock, no write refused, no sync left unrecorded.
  for (const r of results)
    expect(['succeeded', 'superseded', 'not_found'], r.errorMessage).toContain(r.status);
  const runs = await handle.db
    .select()
    .from(syncRuns)
    .where(eq(syncRuns.subscriberId, subscriberId))
    .orderBy(asc(syncRuns.id));
  expect(runs).toHaveLength(notFounds + 3);

  const expected = replay(runs, threshold, cards.length);
  for (const run of runs.filter((r) => r.status === 'not_found')) {
    expect(run.removed, `run ${run.id}`).toBe(expected.removedBy.get(run.id));
  }
  for (const run of runs.filter((r) => r.status === 'succeeded')) {
    expect(run.restored, `run ${run.id}`).toBe(expected.restoredBy.get(run.id));
  }
  const [sub] = await handle.db.select().from(subscribers).where(eq(subscribers.subscriberId, subscriberId));
  expect(sub).toMatchObject({ consecutiveNotFound: expected.count, activeCards: expected.active });
  expect(sub!.goneAt === null).toBe(expected.active > 0);
  const stored = await handle.db.select().from(savedCards).where(eq(savedCards.subscriberId, subscriberId));
  expect(stored.filter((c) => c.removedAt === null)).toHaveLength(expected.active);

  // Each removal by the policy is one history row per card, in the run that removed it; a card's
  // history alternates removed and restored, so no card was removed twice.
  const changes = await handle.db
    .select()
    .from(savedCardChanges)
    .where(eq(savedCardChanges.subscriberId, subscriberId))
    .orderBy(asc(savedCardChanges.id));
  for (const run of runs.filter((r) => r.removed > 0)) {
    const rows = changes.filter((c) => c.syncRunId === run.id);
    expect(rows.every((c) => c.change === 'removed' && c.reason === 'not_found')).toBe(true);
    expect(new Set(rows.map((c) => c.cardId)).size).toBe(run.removed);
    expect(rows).toHaveLength(run.removed);
    expect(results.find((r) => r.syncRunId === run.id)?.errorMessage).toContain(`${threshold} in a row`);
  }
  for (const card of cards) {
    const kinds = changes.filter((c) => c.cardId === card.id).map((c) => c.change);
    expect(kinds[0]).toBe('added');
    for (let i = 1; i < kinds.length; i++) {
      expect(kinds[i], `card ${card.id}: ${kinds.join(', ')}`).toBe(i % 2 ? 'removed' : 'restored');
    }
  }
  return { runs, expected };
}

describe('not_found syncs racing each other and a success', () => {
  it('count, removal and restore come out as if the syncs had run one by one, round after round', async () => {
    const thresholds = [3, 1, 2, 3, 5, 3, 0, 3, 1, 3];
    let removals = 0;
    let restoresAfterRemoval = 0;
    let uncounted = 0;
    for (const [i, threshold] of thresholds.entries()) {
      const { runs, expected } = await runRound({
        subscriberId: 500 + i,
        threshold,
        notFounds: 20,
        retried: 6,
      });
      removals += runs.filter((r) => r.removed > 0).length;
      restoresAfterRemoval += [...expected.restoredBy.values()].filter((n) => n > 0).length;
      uncounted += expected.uncounted;
    }
    // The rounds really raced: some removed cards, and some successes landed after a removal.
    expect(removals).toBeGreaterThan(0);
    expect(restoresAfterRemoval + removals).toBeGreaterThan(thresholds.length / 2);
    // Retried jobs (and answers older than the success) were recorded without counting.
    expect(uncounted).toBeGreaterThanOrEqual(thresholds.length * 3);
  }, 120_000);
});

describe('a card moving to another subscriber while the policy removes', () => {
  it('no deadlock and no card removed twice, whichever transaction locks the cards first', async () => {
    const firstBy = { not_found: 0, taker: 0 };
    for (let round = 0; round < 24; round++) {
      const gone = 600 + round;
      const taker = 700 + round;
      const cards = Array.from({ length: 150 }, () => makeCard(gone));
      upstream.script.set(`id:${gone}`, ok(cards));
      expect(await sync(gone, 1)).toMatchObject({ status: 'succeeded' });
      upstream.script.set(`id:${gone}`, { status: 404 });
      // The taker's answer lists the same cards, now under its own id. Before the removal they are
      // `gone`'s, held (a conflict); after it they are free, and the taker restores them. Either
      // way it locks them (row locks, ascending ids) without `gone`'s advisory lock.
      upstream.script.set(`id:${taker}`, ok(cards.map((c) => ({ ...c, subscriberId: taker }))));
      const results = await Promise.all([
        ...Array.from({ length: 3 }, async () => {
          await jitter(6);
          return sync(gone, 1);
        }),
        (async () => {
          await jitter(6);
          return sync(taker, 1);
        })(),
      ]);
      for (const r of results) expect(['succeeded', 'not_found'], r.errorMessage).toContain(r.status);
      const held = await handle.pool.query('select 1 from card_conflicts where claimant_subscriber_id = $1', [
        taker,
      ]);
      // All or nothing: the taker saw every card held, or every card free.
      expect([0, cards.length]).toContain(held.rowCount);
      firstBy[held.rowCount === 0 ? 'not_found' : 'taker']++;
      // The taker's next sync finds the cards free: every card ends with the taker, present.
      expect(await sync(taker, 1)).toMatchObject({ status: 'succeeded' });
      const stored = await handle.db.select().from(savedCards).where(eq(savedCards.subscriberId, taker));
      expect(stored.filter((c) => c.removedAt === null)).toHaveLength(cards.length);
      const open = await handle.pool.query(
        'select 1 from card_conflicts where claimant_subscriber_id = $1 and resolved_at is null',
        [taker],
      );
      expect(open.rowCount).toBe(0);
      // `gone` lost each card exactly once, to the 404 policy.
      const removals = (
        await handle.db.select().from(savedCardChanges).where(eq(savedCardChanges.subscriberId, gone))
      ).filter((c) => c.change === 'removed');
      expect(removals).toHaveLength(cards.length);
      expect(new Set(removals.map((c) => c.cardId)).size).toBe(cards.length);
      expect(new Set(removals.map((c) => c.reason))).toEqual(new Set(['not_found']));
      const [sub] = await handle.db.select().from(subscribers).where(eq(subscribers.subscriberId, gone));
      expect(sub!.activeCards).toBe(0);
    }
    // Over the rounds, each side got to the cards first at least once.
    expect(firstBy.not_found, JSON.stringify(firstBy)).toBeGreaterThan(0);
    expect(firstBy.taker, JSON.stringify(firstBy)).toBeGreaterThan(0);
  }, 60_000);

  it('both waiting on one card, they lock in one order: no deadlock', async () => {
    const gone = 650;
    const taker = 750;
    const cards = Array.from({ length: 20 }, () => makeCard(gone));
    upstream.script.set(`id:${gone}`, ok(cards));
    expect(await sync(gone, 1)).toMatchObject({ status: 'succeeded' });
    upstream.script.set(`id:${gone}`, { status: 404 });
    upstream.script.set(`id:${taker}`, ok(cards.map((c) => ({ ...c, subscriberId: taker }))));
    // Someone holds the highest card: the removal and then the move queue up behind it, each
    // holding what it locked so far. Locked in opposite orders, they would deadlock on release.
    const blocker = await handle.pool.connect();
    const lockWaits = (n: number) =>
      waitFor(`${n} transactions waiting for a lock`, async () => {
        const { rows } = await handle.pool.query<{ n: number }>(
          `select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`,
        );
        return rows[0]!.n >= n;
      });
    try {
      await blocker.query('begin');
      await blocker.query('select id from saved_cards where id = $1 for update', [cards.at(-1)!.id]);
      const removal = sync(gone, 1);
      await lockWaits(1);
      const move = sync(taker, 1);
      await lockWaits(2);
      await blocker.query('commit');
      const [removed, moved] = await Promise.all([removal, move]);
      expect(removed).toMatchObject({ status: 'not_found', counts: { removed: cards.length } });
      expect(moved).toMatchObject({ status: 'succeeded', counts: { restored: cards.length } });
    } finally {
      blocker.release();
    }
  });
});
