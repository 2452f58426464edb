import { afterAll, describe, expect, it } from 'vitest';
import { createRefreshQueue } from '../../jobs/refresh/index.js';
import { createAdminApp } from '../../src/admin/app.js';
import type { SavedCard } from '../../src/api/index.js';
import { createMetrics } from '../../src/metrics/index.js';
import { applyCardsBatch } from '../../src/sync/apply-cards.js';
import type { CardsToApply } from '../../src/sync/cards-to-apply.js';
import { CardConflictError, readCardToken } from '../../src/tokens/index.js';
import { ADMIN_TOKEN, CARD_TOKEN_KEYS, makeCard, testTokens } from '../support/fixtures.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';
import { runCli, testQueue } from '../support/queue-helpers.js';

// A card listed by two subscribers at once (an upstream bug, or a card shared in a family account)
// is a conflict: the card stays with the subscriber that holds it, its token is not handed out,
// and it moves only once the holder's own answer no longer lists it.

const database = useTestDatabase();
const db = () => database.handle.db;
const who = { actor: 'billing-job', source: 'cli' as const };

function answer(subscriberId: number, cards: SavedCard[]): CardsToApply {
  return {
    subscriberId,
    cards: cards.map((c) => ({ ...c, subscriberId })),
    run: { email: null, trigger: 'manual', jobId: null, refreshRunId: null, startedAt: new Date() },
  };
}

async function sync(subscriberId: number, cards: SavedCard[]) {
  const [result] = await applyCardsBatch(db(), testTokens, [answer(subscriberId, cards)]);
  expect(result!.status).toBe('succeeded');
  return result!;
}

async function rows<T>(text: string, values: unknown[] = []): Promise<T[]> {
  return (await database.handle.pool.query(text, values)).rows as T[];
}

const holderOf = async (cardId: number) =>
  (
    await rows<{ subscriber_id: number; removed_at: Date | null }>(
      'select subscriber_id, removed_at from saved_cards where id = $1',
      [cardId],
    )
  )[0];

const historyOf = (cardId: number) =>
  rows<{ subscriber_id: number; change: string; reason: string | null }>(
    'select subscriber_id, change, reason from saved_card_changes where card_id = $1 order by id',
    [cardId],
  );

const conflictsOf = (cardId: number) =>
  rows<{ holder: number; claimant: number; resolution: string | null; open: boolean }>(
    `select holder_subscriber_id as holder, claimant_subscriber_id as claimant, resolution,
       resolved_at is null as open from card_conflicts where card_id = $1 order by id`,
    [cardId],
  );

describe('a card listed by two subscribers at once', () => {
  const [holder, claimant] = [8101, 8102];
  const shared = makeCard(holder);
  const own = makeCard(claimant);

  it('stays with its holder, is recorded once, and flips nothing on later syncs', async () => {
    await sync(holder, [shared]);
    const first = await sync(claimant, [shared, own]);
    expect(first.counts).toMatchObject({ cardsSeen: 2, inserted: 1, updated: 0, removed: 0, restored: 0 });

    expect(await holderOf(shared.id)).toEqual({ subscriber_id: holder, removed_at: null });
    expect(await historyOf(shared.id)).toEqual([
      { subscriber_id: holder, change: 'added', reason: null },
      { subscriber_id: claimant, change: 'conflict', reason: 'held_by_another' },
    ]);
    expect(await conflictsOf(shared.id)).toEqual([{ holder, claimant, resolution: null, open: true }]);
    const [sub] = await rows<{ active_cards: number }>(
      'select active_cards from subscribers where subscriber_id = $1',
      [claimant],
    );
    expect(sub!.active_cards).toBe(1);

    // Each side syncs again, the same answers, several times: no new history, no flip.
    for (let i = 0; i < 3; i++) {
      await sync(claimant, [shared, own]);
      await sync(holder, [shared]);
    }
    expect(await holderOf(shared.id)).toEqual({ subscriber_id: holder, removed_at: null });
    expect(await historyOf(shared.id)).toHaveLength(2);
    expect(await conflictsOf(shared.id)).toHaveLength(1);
    // The claimant's identical answers are never taken on trust: its conflict is looked at each time.
    const [claimantRow] = await rows<{ cards_digest: string | null }>(
      'select cards_digest from subscribers where subscriber_id = $1',
      [claimant],
    );
    expect(claimantRow!.cards_digest ?? '').toBe('');
  });

  it('has its token refused (audited), and shows in status and /metrics', async () => {
    const error = await readCardToken(db(), testTokens, shared.id, who).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CardConflictError);
    expect((error as Error).message).toContain(`subscriber ${holder} holds it and subscriber ${claimant}`);
    expect((error as Error).message).not.toContain(shared.cardToken);
    const audit = await rows<{ action: string; detail: { cardId: number; reason: string } }>(
      `select action, detail from admin_actions where actor = 'billing-job' order by id`,
    );
    expect(audit.at(-1)).toMatchObject({
      action: 'token_refused',
      detail: { cardId: shared.id, reason: 'card_conflict' },
    });
    // As a billing job runs it: one line naming both subscribers, exit 1, no token on stdout.
    const cli = await runCli(['token', '--card-id', String(shared.id)], {
      DATABASE_URL: database.url,
      CARD_TOKEN_KEYS,
    });
    expect(cli.code).toBe(1);
    expect(cli.stdout).toBe('');
    expect(cli.stderr.trim().split('\n')).toHaveLength(1);
    expect(cli.stderr).toContain(`card ${shared.id} is in conflict`);
    // The claimant's own card is not in conflict.
    await expect(readCardToken(db(), testTokens, own.id, who)).resolves.toBe(own.cardToken);

    const { readDataStatus } = await import('../../db/admin/status.js');
    expect((await readDataStatus(db())).conflicts.open).toBe(1);
    const text = await scrapeMetrics();
    expect(text).toMatch(/^cards_sync_card_conflicts 1$/m);
    const overview = await (await adminFetch('/admin')).text();
    expect(overview).toMatch(/id="conflicts"><b>1<\/b> card listed by two subscribers at once/);
  });

  it('moves only once the holder’s own answer no longer lists it, and the token is served again', async () => {
    await sync(holder, []);
    expect(await holderOf(shared.id)).toMatchObject({ subscriber_id: holder });
    expect((await holderOf(shared.id))!.removed_at).not.toBeNull();

    const taking = await sync(claimant, [shared, own]);
    expect(taking.counts).toMatchObject({ restored: 1 });
    expect(await holderOf(shared.id)).toEqual({ subscriber_id: claimant, removed_at: null });
    expect(await historyOf(shared.id)).toEqual([
      { subscriber_id: holder, change: 'added', reason: null },
      { subscriber_id: claimant, change: 'conflict', reason: 'held_by_another' },
      { subscriber_id: holder, change: 'removed', reason: null },
      { subscriber_id: claimant, change: 'restored', reason: 'conflict_resolved' },
    ]);
    expect(await conflictsOf(shared.id)).toEqual([{ holder, claimant, resolution: 'moved', open: false }]);
    await expect(readCardToken(db(), testTokens, shared.id, who)).resolves.toBe(shared.cardToken);
    expect(await scrapeMetrics()).toMatch(/^cards_sync_card_conflicts 0$/m);
  });
});

it('a conflict ends when the claimant’s answer no longer lists the card, the card never having moved', async () => {
  const [holder, claimant] = [8201, 8202];
  const card = makeCard(holder);
  await sync(holder, [card]);
  await sync(claimant, [card]);
  expect(await conflictsOf(card.id)).toMatchObject([{ open: true }]);
  await sync(claimant, []);
  expect(await conflictsOf(card.id)).toEqual([
    { holder, claimant, resolution: 'claimant_dropped', open: false },
  ]);
  expect(await holderOf(card.id)).toEqual({ subscriber_id: holder, removed_at: null });
  expect((await historyOf(card.id)).map((h) => h.change)).toEqual(['added', 'conflict']);
});

it('a card its holder drops and another lists in the same batch moves at once, with no conflict', async () => {
  const [holder, claimant] = [8301, 8302];
  const card = makeCard(holder);
  await sync(holder, [card]);
  await applyCardsBatch(db(), testTokens, [answer(claimant, [card]), answer(holder, [])]);
  expect(await holderOf(card.id)).toEqual({ subscriber_id: claimant, removed_at: null });
  expect(await conflictsOf(card.id)).toEqual([]);
  expect((await historyOf(card.id)).map((h) => [h.subscriber_id, h.change, h.reason])).toEqual([
    [holder, 'added', null],
    [claimant, 'updated', null],
    [holder, 'removed', 'moved'],
  ]);
});

it('three subscribers listing one card: one holder, two open conflicts', async () => {
  const [holder, second, third] = [8401, 8402, 8403];
  const card = makeCard(holder);
  await sync(holder, [card]);
  await sync(second, [card]);
  await sync(third, [card]);
  expect(await conflictsOf(card.id)).toEqual([
    { holder, claimant: second, resolution: null, open: true },
    { holder, claimant: third, resolution: null, open: true },
  ]);
  expect(await holderOf(card.id)).toEqual({ subscriber_id: holder, removed_at: null });
});

const q = testQueue();
const metrics = createMetrics({ defaultMetrics: false });
let admin: ReturnType<typeof createAdminApp> | undefined;
afterAll(async () => {
  await admin?.stop();
});
async function scrapeMetrics(): Promise<string> {
  const res = await adminFetch('/metrics');
  expect(res.status).toBe(200);
  return res.text();
}
async function adminFetch(path: string): Promise<Response> {
  admin ??= createAdminApp({
    db: db(),
    redis: q.redis,
    syncQueue: q.queue,
    refreshQueue: createRefreshQueue(q.redis, q.prefix),
    metrics,
    logger: captureLogger('info').logger,
    adminToken: ADMIN_TOKEN,
    prefix: q.prefix,
  });
  return admin.app.fetch(
    new Request(`http://localhost${path}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }),
  );
}
