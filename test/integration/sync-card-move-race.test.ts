import { eq, inArray } from 'drizzle-orm';
import pg from 'pg';
import { expect, it } from 'vitest';
import { createDb } from '../../db/client.js';
import { savedCardChanges, savedCards, savedCardsActive, subscribers } from '../../db/schema/index.js';
import type { SavedCard } from '../../src/api/index.js';
import { applyCardsBatch } from '../../src/sync/apply-cards.js';
import type { CardsToApply } from '../../src/sync/cards-to-apply.js';
import { makeCard, testTokens } from '../support/fixtures.js';
import { useTestDatabase } from '../support/helpers.js';
import { waitFor } from '../support/queue-helpers.js';

// A card its old owner drops while, at the same moment, another subscriber's sync takes it over.
// The two syncs hold different subscribers' locks, so nothing but the card's row orders them.

const database = useTestDatabase();

function answer(subscriberId: number, cards: SavedCard[]): CardsToApply {
  return {
    subscriberId,
    cards,
    run: { email: null, trigger: 'manual', jobId: null, refreshRunId: null, startedAt: new Date() },
  };
}

/** Backends of this database waiting for a lock. */
async function waitingOnLocks(): Promise<number> {
  const r = await database.handle.pool.query<{ n: number }>(
    `select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`,
  );
  return r.rows[0]!.n;
}

it('a card dropped by its owner while another sync takes it over gets one removal in the old owner’s history', async () => {
  const [oldOwner, newOwner] = [7101, 7102];
  const card = makeCard(oldOwner);
  await applyCardsBatch(database.handle.db, testTokens, [answer(oldOwner, [card])]);

  // Holding the old owner's `subscribers` row keeps its sync's transaction open after it has
  // marked the card removed (that row is written last), so the other sync runs in the middle.
  const holder = new pg.Client({ connectionString: database.url });
  await holder.connect();
  await holder.query('begin');
  await holder.query('select 1 from subscribers where subscriber_id = $1 for update', [oldOwner]);
  const dropping = applyCardsBatch(database.handle.db, testTokens, [answer(oldOwner, [])]);
  await waitFor('the old owner’s sync to wait', async () => (await waitingOnLocks()) === 1);
  const taking = applyCardsBatch(database.handle.db, testTokens, [
    answer(newOwner, [{ ...card, subscriberId: newOwner }]),
  ]);
  await waitFor('the new owner’s sync to wait for the card', async () => (await waitingOnLocks()) === 2);
  await holder.query('commit');
  await holder.end();
  await Promise.all([dropping, taking]);

  const history = await database.handle.db
    .select()
    .from(savedCardChanges)
    .where(inArray(savedCardChanges.subscriberId, [oldOwner, newOwner]))
    .orderBy(savedCardChanges.id);
  expect(history.map((h) => [h.subscriberId, h.change])).toEqual([
    [oldOwner, 'added'],
    [oldOwner, 'removed'],
    // Taken over after the removal: to the new owner it comes back from removed.
    [newOwner, 'restored'],
  ]);
  const [row] = await database.handle.db
    .select()
    .from(savedCards)
    .where(inArray(savedCards.id, [card.id]));
  expect(row).toMatchObject({ subscriberId: newOwner, removedAt: null });
});

it('a card another sync claims between a sync’s read and its write stays with its owner, whose digest holds', async () => {
  const [owner, taker] = [7201, 7202];
  const [kept, taken, added] = [makeCard(owner), makeCard(owner), makeCard(owner)];
  await applyCardsBatch(database.handle.db, testTokens, [answer(owner, [kept, taken])]);

  // The owner's next sync lists `taken` unchanged, so it neither writes nor locks that row. Its
  // write is held back until the other sync, whose answer lists the card too, has committed.
  const held = createDb(database.url, { max: 1 });
  const connect = held.pool.connect.bind(held.pool);
  held.pool.connect = (async () => {
    const client = await connect();
    const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
    let gate: Promise<unknown> | undefined;
    client.query = ((...args: unknown[]) => {
      const config = args[0] as { name?: string } | string;
      if (gate === undefined && typeof config === 'object' && config.name === 'cards-sync-write-batch') {
        gate = applyCardsBatch(database.handle.db, testTokens, [
          answer(taker, [{ ...taken, subscriberId: taker }]),
        ]);
      }
      // Every query from the write on waits for the other sync, in the order it was issued.
      return gate === undefined ? query(...args) : gate.then(() => query(...args));
    }) as typeof client.query;
    return client;
  }) as typeof held.pool.connect;
  try {
    await applyCardsBatch(held.db, testTokens, [answer(owner, [kept, taken, added])]);
  } finally {
    await held.close();
  }
  // The card is the owner's (a conflict, not a move), so the digest the owner wrote is true.
  const [afterRace] = await database.handle.db
    .select()
    .from(subscribers)
    .where(eq(subscribers.subscriberId, owner));
  expect(afterRace?.cardsDigest).not.toBeNull();
  const conflicts = await database.handle.pool.query(
    'select holder_subscriber_id, claimant_subscriber_id from card_conflicts where card_id = $1 and resolved_at is null',
    [taken.id],
  );
  expect(conflicts.rows).toEqual([{ holder_subscriber_id: owner, claimant_subscriber_id: taker }]);

  // The other's answer drops it: the conflict ends; the owner's identical answer changes nothing.
  await applyCardsBatch(database.handle.db, testTokens, [answer(taker, [])]);
  const [again] = await applyCardsBatch(database.handle.db, testTokens, [
    answer(owner, [kept, taken, added]),
  ]);
  expect(again!.counts).toMatchObject({ unchanged: 3 });
  const active = await database.handle.db
    .select({ id: savedCardsActive.id, subscriberId: savedCardsActive.subscriberId })
    .from(savedCardsActive)
    .where(inArray(savedCardsActive.subscriberId, [owner, taker]));
  expect(active.sort((a, b) => a.id - b.id)).toEqual(
    [kept, taken, added].map((c) => ({ id: c.id, subscriberId: owner })),
  );
});
