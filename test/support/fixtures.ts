import { createHash } from 'node:crypto';
import { afterAll, beforeAll } from 'vitest';
import type { StoredCard } from '../../db/sync/index.js';
import { type ApiClient, createApiClient, type SavedCard } from '../../src/api/index.js';
import {
  createMockApi,
  type MockApi,
  type MockApiOptions,
  type MockLookup,
  type MockReply,
} from '../../src/mock-api/server.js';
import type { CardsToApply } from '../../src/sync/cards-to-apply.js';
import { cardTokens, parseKeyRing } from '../../src/tokens/index.js';

export const API_KEY = '3f2b8c1e-9d4a-4e6b-a1c7-5e0f2d9b8a61';
/** The admin server's token in tests that start one. */
export const ADMIN_TOKEN = 'test-admin-token-4f1c9a7e2b';

/** The tests' card-token key (CARD_TOKEN_KEYS): tokens are sealed as in production. Searched for in every log. */
export const TEST_TOKEN_KEY = createHash('sha256')
  .update('cards-sync test card-token key 1')
  .digest('base64');
export const CARD_TOKEN_KEYS = `test1:${TEST_TOKEN_KEY}`;
/** How the tests' syncs store tokens: sealed under {@link CARD_TOKEN_KEYS}. */
export const testTokens = cardTokens(true, parseKeyRing(CARD_TOKEN_KEYS));

let nextCardId = 1_000_000;

/** A valid card of the given subscriber; every field may be overridden. */
export function makeCard(subscriberId: number, overrides: Partial<SavedCard> = {}): SavedCard {
  const id = overrides.id ?? nextCardId++;
  return {
    id,
    cardToken: `tok${String(id).padStart(29, '0')}`,
    binNumber: '4761-xxxx-xxxx-0043',
    cardFamily: 'Bonus',
    cardBankCode: 100100000,
    cardBankName: 'AKBA',
    subscriberId,
    companyId: -1,
    createDate: '2021-02-28T14:01:35+03:00',
    ...overrides,
  };
}

/** An answer as a manual sync hands it to the card writer (job `job-<subscriberId>`). */
export function answerOf(
  subscriberId: number,
  cards: SavedCard[],
  extra: Partial<CardsToApply> = {},
): CardsToApply {
  return {
    subscriberId,
    cards,
    run: {
      email: null,
      trigger: 'manual',
      jobId: `job-${subscriberId}`,
      refreshRunId: null,
      startedAt: new Date(),
    },
    ...extra,
  };
}
function lookupKey(lookup: MockLookup): string {
  return lookup.kind === 'id' ? `id:${lookup.subscriberId}` : `email:${lookup.email}`;
}

/**
 * The mock API on loopback with scripted answers: `script.set('id:42', reply)` answers that
 * lookup; a function reply is called per request. Unscripted lookups get the deterministic data.
 */
export function useScriptedApi(options: MockApiOptions = {}) {
  const script = new Map<string, MockReply | ((n: number) => MockReply)>();
  const calls = new Map<string, number>();
  const ctx = { url: '', script, calls, mock: undefined as unknown as MockApi };
  beforeAll(async () => {
    ctx.mock = createMockApi({
      apiKey: API_KEY,
      ...options,
      override: (lookup) => {
        const key = lookupKey(lookup);
        const n = (calls.get(key) ?? 0) + 1;
        calls.set(key, n);
        const reply = script.get(key);
        return typeof reply === 'function' ? reply(n) : reply;
      },
    });
    ctx.url = await ctx.mock.start();
  });
  afterAll(async () => {
    await ctx.mock?.stop();
  });
  return ctx;
}

/**
 * A client of a scripted API ({@link useScriptedApi}) as the sync uses one, made once the server
 * listens and closed after the file: `.client` inside tests and hooks.
 */
export function useScriptedApiClient(upstream: { url: string }): { readonly client: ApiClient } {
  let client: ApiClient | undefined;
  beforeAll(() => {
    client = createApiClient({
      baseUrl: upstream.url,
      apiKey: API_KEY,
      pathStyle: 'standard',
      timeoutMs: 2000,
    });
  });
  afterAll(async () => {
    await client?.close();
  });
  return {
    get client() {
      if (client === undefined) throw new Error('the scripted API client is made in beforeAll');
      return client;
    },
  };
}

export const ok = (cards: unknown): MockReply => ({ status: 200, body: cards });

/** The environment a worker process of the tests runs with: this database, queue and API. */
export function workerEnv(
  where: { databaseUrl: string; redisUrl: string; prefix: string; apiUrl: string },
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    DATABASE_URL: where.databaseUrl,
    REDIS_URL: where.redisUrl,
    QUEUE_PREFIX: where.prefix,
    CARDS_API_BASE_URL: where.apiUrl,
    CARDS_API_KEY: API_KEY,
    CARD_TOKEN_KEYS,
    ...extra,
  };
}

/** The stored row of `card` as a sync last wrote it (its token plain), with any field overridden. */
export function storedCardOf(card: SavedCard, over: Partial<StoredCard> = {}): StoredCard {
  return {
    id: card.id,
    subscriberId: card.subscriberId,
    token: { value: card.cardToken, fingerprint: null },
    binNumber: card.binNumber,
    cardFamily: card.cardFamily,
    cardBankCode: card.cardBankCode,
    cardBankName: card.cardBankName,
    companyId: card.companyId,
    createDate: new Date(card.createDate),
    removedAt: null,
    ...over,
  };
}
