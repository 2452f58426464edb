import { randomBytes } from 'node:crypto';
import { eq, inArray } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { savedCardChanges, savedCards, syncRuns } from '../../db/schema/index.js';
import { type ApiClient, createApiClient } from '../../src/api/index.js';
import { loadConfig, requireCardTokens } from '../../src/config/index.js';
import { ConfigError } from '../../src/shared/index.js';
import { syncSubscriber } from '../../src/sync/index.js';
import { cardTokens } from '../../src/tokens/index.js';
import {
  type KeyRing,
  newKeyMaterial,
  parseKeyRing,
  sealedKeyId,
  TokenKeyError,
} from '../../src/tokens/keyring.js';
import { API_KEY, makeCard, ok, useScriptedApi } from '../support/fixtures.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';

// Card tokens at rest: sealed with AES-256-GCM under a key ring, compared by fingerprint.

const K1 = newKeyMaterial();
const K2 = newKeyMaterial();

describe('the key ring', () => {
  const ring = parseKeyRing(`k1:${K1},k2:${K2}`);

  it('seals under the first key with a fresh nonce, names the key, and opens again', () => {
    const a = ring.seal(7, 'tok-secret-1');
    const b = ring.seal(7, 'tok-secret-1');
    expect(a.value).toMatch(/^ct1:k1:[A-Za-z0-9_-]+$/);
    expect(a.value).not.toBe(b.value);
    expect(a.value).not.toContain('tok-secret-1');
    expect(a.fingerprint).toBe(b.fingerprint);
    expect(ring.open(7, a.value)).toBe('tok-secret-1');
    expect(sealedKeyId(a.value)).toBe('k1');
  });

  it('opens values sealed under any key of the ring, and compares fingerprints under that key', () => {
    const old = parseKeyRing(`k2:${K2}`).seal(8, 'tok-old');
    expect(ring.open(8, old.value)).toBe('tok-old');
    expect(ring.fingerprintLike(8, old.value, 'tok-old')).toBe(old.fingerprint);
    expect(ring.fingerprintLike(8, old.value, 'tok-other')).not.toBe(old.fingerprint);
  });

  it('refuses an altered value loudly instead of decrypting it to garbage', () => {
    const { value } = ring.seal(9, 'tok-9');
    const body = Buffer.from(value.split(':')[2]!, 'base64url');
    body[body.length - 1]! ^= 0x01; // the tag's last byte
    const altered = `ct1:k1:${body.toString('base64url')}`;
    expect(() => ring.open(9, altered)).toThrow(TokenKeyError);
    expect(() => ring.open(9, altered)).toThrow(/failed authentication under key k1/);
    // Bound to its card: the value of card 9 does not open as card 10's.
    expect(() => ring.open(10, value)).toThrow(/failed authentication/);
  });

  it('names the missing key of a value sealed under a key the ring does not hold', () => {
    const stranger = parseKeyRing(`gone:${newKeyMaterial()}`).seal(11, 'tok-11');
    const error = (() => {
      try {
        ring.open(11, stranger.value);
      } catch (e) {
        return e as TokenKeyError;
      }
    })();
    expect(error?.code).toBe('token_key_unknown');
    expect(error?.message).toMatch(/sealed under key gone, which CARD_TOKEN_KEYS does not hold/);
  });

  it.each([
    ['no colon', K1],
    ['a key of 31 bytes', `k1:${randomBytes(31).toString('base64')}`],
    ['a key of 33 bytes', `k1:${randomBytes(33).toString('base64')}`],
    ['not base64', 'k1:not base64!'],
    ['a key id with a space', `k 1:${K1}`],
    ['the same id twice', `k1:${K1},k1:${K2}`],
    ['nothing', ' , '],
  ])('refuses a ring with %s, without echoing key material', (_name, raw) => {
    const run = () => loadConfig({ CARD_TOKEN_KEYS: raw });
    expect(run).toThrow(ConfigError);
    expect(run).toThrow(/^CARD_TOKEN_KEYS is not a key ring/);
    try {
      run();
    } catch (error) {
      expect((error as Error).message).not.toContain(K1);
      expect((error as Error).message).not.toContain(K2);
      expect((error as Error).message).toContain('openssl rand -base64 32');
    }
  });

  it('takes one key per line from CARD_TOKEN_KEYS_FILE, and refuses both variables at once', async () => {
    const { mkdtempSync, writeFileSync } = await import('node:fs');
    const dir = mkdtempSync('/tmp/cards-sync-keys-');
    writeFileSync(`${dir}/keys`, `k2:${K2}\nk1:${K1}\n`);
    const config = loadConfig({ CARD_TOKEN_KEYS_FILE: `${dir}/keys` });
    expect(config.tokens.ring?.ids).toEqual(['k2', 'k1']);
    expect(config.tokens.ring?.primaryId).toBe('k2');
    expect(() => loadConfig({ CARD_TOKEN_KEYS_FILE: `${dir}/missing` })).toThrow(
      /CARD_TOKEN_KEYS_FILE names a file that cannot be read \(ENOENT\)/,
    );
    expect(() => loadConfig({ CARD_TOKEN_KEYS: `k1:${K1}`, CARD_TOKEN_KEYS_FILE: `${dir}/keys` })).toThrow(
      /set only one of CARD_TOKEN_KEYS and CARD_TOKEN_KEYS_FILE/,
    );
  });

  it('refuses to write cards with encryption on and no keys, saying how to make one; off is explicit', () => {
    expect(() => requireCardTokens(loadConfig({}).tokens)).toThrow(
      /CARD_TOKEN_KEYS is not set, and card tokens are stored encrypted \(CARD_TOKEN_ENCRYPTION=on\): generate a key with `openssl rand -base64 32`/,
    );
    expect(requireCardTokens(loadConfig({ CARD_TOKEN_ENCRYPTION: 'off' }).tokens).sealing).toBe(false);
    expect(() => loadConfig({ CARD_TOKEN_ENCRYPTION: 'maybe' })).toThrow(
      'CARD_TOKEN_ENCRYPTION must be on or off (got "maybe")',
    );
  });
});

describe('syncs with sealed tokens', () => {
  const database = useTestDatabase();
  const upstream = useScriptedApi();
  const { logger } = captureLogger();
  let api: ApiClient;
  beforeAll(() => {
    api = createApiClient({ baseUrl: upstream.url, apiKey: API_KEY, pathStyle: 'standard', timeoutMs: 2000 });
  });
  afterAll(async () => {
    await api.close();
  });
  const syncWith = (ring: KeyRing | undefined, sealing: boolean, subscriberId: number) =>
    syncSubscriber(
      { db: database.handle.db, api, logger, tokens: cardTokens(sealing, ring) },
      { target: { subscriberId }, trigger: 'manual' },
    );
  const rowsOf = (subscriberId: number) =>
    database.handle.db
      .select()
      .from(savedCards)
      .where(eq(savedCards.subscriberId, subscriberId))
      .orderBy(savedCards.id);

  it('stores no token, only its sealed value and fingerprint, and an unchanged sync rewrites neither', async () => {
    const ring = parseKeyRing(`k1:${K1}`);
    const cards = [makeCard(5001), makeCard(5001)];
    upstream.script.set('id:5001', ok(cards));
    expect((await syncWith(ring, true, 5001)).status).toBe('succeeded');
    const first = await rowsOf(5001);
    for (const [i, row] of first.entries()) {
      expect(row.cardToken).toMatch(/^ct1:k1:/);
      expect(row.cardToken).not.toContain(cards[i]!.cardToken);
      expect(row.cardTokenFingerprint).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(ring.open(row.id, row.cardToken)).toBe(cards[i]!.cardToken);
    }
    const again = await syncWith(ring, true, 5001);
    expect(again.counts).toMatchObject({ unchanged: 2, updated: 0 });
    const second = await rowsOf(5001);
    expect(second.map((r) => [r.cardToken, r.cardTokenFingerprint, r.updatedAt])).toEqual(
      first.map((r) => [r.cardToken, r.cardTokenFingerprint, r.updatedAt]),
    );
  });

  it('a new token upstream is an update of card_token, sealed afresh; other changes keep the sealed value', async () => {
    const ring = parseKeyRing(`k1:${K1}`);
    const card = makeCard(5002);
    upstream.script.set('id:5002', ok([card]));
    await syncWith(ring, true, 5002);
    const [before] = await rowsOf(5002);
    upstream.script.set('id:5002', ok([{ ...card, cardBankName: 'ISBANK' }]));
    await syncWith(ring, true, 5002);
    const [renamed] = await rowsOf(5002);
    expect(renamed!.cardToken).toBe(before!.cardToken);
    upstream.script.set('id:5002', ok([{ ...card, cardBankName: 'ISBANK', cardToken: 'tok-new-5002' }]));
    const changed = await syncWith(ring, true, 5002);
    expect(changed.counts.updated).toBe(1);
    const [after] = await rowsOf(5002);
    expect(after!.cardToken).not.toBe(before!.cardToken);
    expect(ring.open(after!.id, after!.cardToken)).toBe('tok-new-5002');
    const history = await database.handle.db
      .select()
      .from(savedCardChanges)
      .where(eq(savedCardChanges.cardId, card.id))
      .orderBy(savedCardChanges.id);
    expect(history.map((h) => h.changedFields)).toEqual([null, ['card_bank_name'], ['card_token']]);
  });

  it('a new first key in the ring: unchanged cards keep their old sealing (no re-encryption), new ones take the new key', async () => {
    const card = makeCard(5003);
    upstream.script.set('id:5003', ok([card]));
    await syncWith(parseKeyRing(`k1:${K1}`), true, 5003);
    const rotated = parseKeyRing(`k2:${K2},k1:${K1}`);
    const added = makeCard(5003);
    upstream.script.set('id:5003', ok([card, added]));
    const result = await syncWith(rotated, true, 5003);
    expect(result.counts).toMatchObject({ unchanged: 1, inserted: 1, updated: 0 });
    const rows = await rowsOf(5003);
    expect(rows.map((r) => sealedKeyId(r.cardToken))).toEqual(['k1', 'k2']);
  });

  it('a stored token under a key the ring lost: the sync fails saying which key, is not retried, and changes nothing', async () => {
    const card = makeCard(5004);
    upstream.script.set('id:5004', ok([card]));
    await syncWith(parseKeyRing(`k1:${K1}`), true, 5004);
    const before = await rowsOf(5004);
    upstream.script.set('id:5004', ok([{ ...card, cardToken: 'tok-changed' }]));
    const result = await syncWith(parseKeyRing(`k2:${K2}`), true, 5004);
    expect(result).toMatchObject({ status: 'failed', errorCode: 'token_key_unknown', retryable: false });
    expect(result.errorMessage).toMatch(/sealed under key k1, which CARD_TOKEN_KEYS does not hold/);
    expect(result.errorMessage).not.toContain('tok-changed');
    expect(await rowsOf(5004)).toEqual(before);
    const runs = await database.handle.db
      .select()
      .from(syncRuns)
      .where(inArray(syncRuns.subscriberId, [5004]));
    expect(runs.map((r) => r.errorCode)).toEqual([null, 'token_key_unknown']);
  });

  it('CARD_TOKEN_ENCRYPTION=off stores tokens as received; a later sync with keys leaves them (rotation seals them)', async () => {
    const card = makeCard(5005);
    upstream.script.set('id:5005', ok([card]));
    await syncWith(undefined, false, 5005);
    const [plain] = await rowsOf(5005);
    expect(plain).toMatchObject({ cardToken: card.cardToken, cardTokenFingerprint: null });
    const result = await syncWith(parseKeyRing(`k1:${K1}`), true, 5005);
    expect(result.counts).toMatchObject({ unchanged: 1, updated: 0 });
    expect((await rowsOf(5005))[0]!.cardToken).toBe(card.cardToken);
  });
});
