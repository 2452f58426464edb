import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Target } from '../../src/api/index.js';
import { type ApiClient, createApiClient } from '../../src/api/index.js';
import { syncSubscriber } from '../../src/sync/index.js';
import { luhnNumber, prng, written } from '../support/card-numbers.js';
import { API_KEY, CARD_TOKEN_KEYS, makeCard, ok, testTokens, useScriptedApi } from '../support/fixtures.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';
import { runCli } from '../support/queue-helpers.js';

// Answers a hostile upstream might send, through a real sync against a loopback API: each is
// refused as invalid_response, nothing is stored, and nothing of the value is printed or logged.

const database = useTestDatabase();
const upstream = useScriptedApi();
const { logger, lines } = captureLogger();
let api: ApiClient;
beforeAll(() => {
  api = createApiClient({ baseUrl: upstream.url, apiKey: API_KEY, pathStyle: 'standard', timeoutMs: 2000 });
});
afterAll(async () => {
  await api.close();
});

const sync = (target: Target) =>
  syncSubscriber({ db: database.handle.db, api, logger, tokens: testTokens }, { target, trigger: 'manual' });
const query = async <T extends pg.QueryResultRow>(text: string, values: unknown[] = []) =>
  (await database.handle.pool.query<T>(text, values)).rows;
const env = () => ({
  DATABASE_URL: database.url,
  REDIS_URL: inject('redisUrl'),
  CARDS_API_BASE_URL: upstream.url,
  CARDS_API_KEY: API_KEY,
  CARD_TOKEN_KEYS,
});

describe('a full card number in a free-text field', () => {
  it('is refused wherever it sits, and the cards stored before stay as they were', async () => {
    const kept = makeCard(3301);
    upstream.script.set('id:3301', ok([kept]));
    expect((await sync({ subscriberId: 3301 })).status).toBe('succeeded');
    const random = prng(3301);
    for (let i = 0; i < 12; i++) {
      const number = written(luhnNumber(13 + (i % 7), random), random).replace(/\t/g, ' ');
      const field = i % 2 === 0 ? 'cardBankName' : 'cardFamily';
      upstream.script.set('id:3301', ok([kept, makeCard(3301, { [field]: `VISA ${number}` })]));
      const result = await sync({ subscriberId: 3301 });
      expect(result).toMatchObject({ status: 'invalid_response', errorCode: 'invalid_response' });
      expect(result.errorMessage).toMatch(
        new RegExp(`^record 1: field "${field}" holds what looks like a full card number`),
      );
      const digits = number.replace(/\D/g, '');
      const stored =
        JSON.stringify(await query('select * from saved_cards')) +
        JSON.stringify(await query('select * from sync_runs'));
      expect(stored.replace(/\D/g, '')).not.toContain(digits);
      expect(lines.join('\n').replace(/\D/g, '')).not.toContain(digits);
    }
    expect(
      await query('select id from saved_cards where subscriber_id = 3301 and removed_at is null'),
    ).toEqual([{ id: kept.id }]);
  });
});

describe('a card number in what upstream says about its answer', () => {
  it('a Content-Length that is a card number reaches neither the ledger, the subscriber nor the log', async () => {
    upstream.script.set('id:3302', ok([makeCard(3302)]));
    expect((await sync({ subscriberId: 3302 })).status).toBe('succeeded');
    upstream.script.set('id:3302', {
      status: 200,
      body: [],
      headers: { 'content-length': '4111111111111111' },
    });
    const result = await sync({ subscriberId: 3302 });
    expect(result.status).toBe('invalid_response');
    expect(result.errorMessage).toContain('[card number]');
    const rows = JSON.stringify(
      await query('select error_message from sync_runs where subscriber_id = 3302'),
    );
    const sub = JSON.stringify(await query('select last_error from subscribers where subscriber_id = 3302'));
    for (const text of [rows, sub, lines.join('\n')]) expect(text).not.toContain('4111111111111111');
  });
});

describe('subscriber ids upstream must not invent', () => {
  it.each([-7, 0])(
    'an e-mail lookup answered with subscriberId %s is refused, and creates no subscriber',
    async (id) => {
      const email = `neg${-id}@example.com`;
      upstream.script.set(`email:${email}`, ok([makeCard(1, { subscriberId: id })]));
      const result = await sync({ email });
      expect(result).toMatchObject({ status: 'invalid_response' });
      expect(result.errorMessage).toMatch(/^record 0: field "subscriberId" must be a positive whole number/);
      expect(await query('select subscriber_id from subscribers where subscriber_id <= 0')).toEqual([]);
      expect(await query('select id from saved_cards where subscriber_id <= 0')).toEqual([]);
    },
  );
});

describe('control characters', () => {
  it('an answer holding an ESC sequence is refused by sync --dry-run: nothing raw reaches the terminal', async () => {
    for (const [n, hostile] of [
      '\u001b[2J\u001b[H',
      '\u001b]0;owned\u0007',
      '\u009b31m',
      'A\u202eKBA',
      'A\rKBA',
    ].entries()) {
      const id = 3400 + n;
      upstream.script.set(`id:${id}`, ok([makeCard(id, { cardBankName: hostile })]));
      const run = await runCli(['sync', '--id', String(id), '--dry-run'], env());
      expect(run.code).toBe(1);
      expect(run.stdout).toContain('invalid_response');
      expect(run.stdout).toMatch(/field "cardBankName" holds a control character \(U\+[0-9A-F]{4}\)/);
      // biome-ignore lint/suspicious/noControlCharactersInRegex: the point
      expect(run.stdout + run.stderr).not.toMatch(/[\u001b\u0007\u009b\u202e\r]/);
      const real = await sync({ subscriberId: id });
      expect(real.status).toBe('invalid_response');
    }
    expect(await query('select id from saved_cards where subscriber_id between 3400 and 3404')).toEqual([]);
  });
});
