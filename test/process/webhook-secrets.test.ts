import { describe, expect, it } from 'vitest';
import { newKeyMaterial, parseKeyRing, TokenKeyError } from '../../src/tokens/index.js';
import {
  endpointTarget,
  insertEndpoint,
  resealEndpointSecrets,
  rotateEndpointSecret,
} from '../../src/webhooks/index.js';
import { secretsIn } from '../faults/secrets.js';
import { CARD_TOKEN_KEYS } from '../support/fixtures.js';
import { useTestDatabase } from '../support/helpers.js';
import { runCli } from '../support/queue-helpers.js';

// Webhook signing secrets at rest: sealed under the card-token key ring, bound to their endpoint,
// moved to a new key by `tokens rotate`.

const database = useTestDatabase();
const ring = parseKeyRing(CARD_TOKEN_KEYS);

describe('webhook secrets at rest', () => {
  it('a sealed secret opens only for its own endpoint, and never holds the secret in clear', () => {
    const sealed = ring.sealSecret('webhook_secret 1', 'whsec_abc');
    expect(sealed).toMatch(/^ct1:test1:/);
    expect(sealed).not.toContain('abc');
    expect(ring.openSecret('webhook_secret 1', sealed)).toBe('whsec_abc');
    expect(() => ring.openSecret('webhook_secret 2', sealed)).toThrow(TokenKeyError);
    expect(() => ring.openSecret('webhook_secret 2', sealed)).toThrow(/sealed for another row/);
  });

  it('tokens rotate re-seals every endpoint secret (the previous one too) under the new first key', async () => {
    const pool = database.handle.pool;
    const a = await insertEndpoint(pool, ring, {
      url: 'https://a.example/',
      description: '',
      eventTypes: null,
      feedCursor: '0-0',
    });
    const b = await insertEndpoint(pool, ring, {
      url: 'https://b.example/',
      description: '',
      eventTypes: null,
      feedCursor: '0-0',
    });
    const bNow = await rotateEndpointSecret(pool, ring, b.id);
    const rotatedKeys = `next:${newKeyMaterial()},${CARD_TOKEN_KEYS}`;
    const run = await runCli(['tokens', 'rotate'], {
      DATABASE_URL: database.url,
      CARD_TOKEN_KEYS: rotatedKeys,
    });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/and the signing secrets of 2 webhook endpoints/);
    const { rows } = await pool.query('select secret, previous_secret from webhook_endpoints order by id');
    for (const r of rows) {
      expect(r.secret).toMatch(/^ct1:next:/);
      if (r.previous_secret !== null) expect(r.previous_secret).toMatch(/^ct1:next:/);
    }
    // Only the new key is needed now.
    const newOnly = parseKeyRing(rotatedKeys.split(',')[0]!);
    expect((await endpointTarget(pool, newOnly, a.id))?.secrets).toEqual([a.secret]);
    expect((await endpointTarget(pool, newOnly, b.id))?.secrets).toEqual([bNow, b.secret]);
    expect(await resealEndpointSecrets(pool, parseKeyRing(rotatedKeys))).toEqual({
      resealed: 0,
      unreadable: [],
    });
  });
});

describe("the run's secret search (test/support/setup/secret-search.ts)", () => {
  it('finds a signing secret inside a log line or an error, not the line `webhooks add` prints for the operator', () => {
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    expect(
      secretsIn(
        [
          `{"level":30,"msg":"endpoint added","secret":"${secret}"}`,
          `Error: could not sign with ${secret}`,
          `signing secret (shown once): ${secret}`,
        ],
        {},
      ),
    ).toEqual(['log 1 line 1: a webhook signing secret', 'log 2 line 1: a webhook signing secret']);
  });

  it('takes no trace id for a card number, though its digits pass Luhn; a card number beside it is still found', () => {
    // A trace id a CI run logged: its 14 digits 08403574078505 pass the Luhn check.
    const traced =
      '{"level":30,"trace_id":"a1c1ef189eb6c08403574078505b499b","span_id":"5080d06d7d6f1d13","msg":"sync succeeded"}';
    const traceparent = 'traceparent=00-a1c1ef189eb6c08403574078505b499b-5080d06d7d6f1d13-01';
    expect(secretsIn([traced, traceparent], {})).toEqual([]);
    expect(secretsIn([`${traced} 4111 1111 1111 1111`], {})).toEqual(['log 1 line 1: a card number']);
    // A card number where a span id goes is still a card number.
    expect(secretsIn(['{"level":30,"span_id":"4111111111111111","msg":"x"}'], {})).toEqual([
      'log 1 line 1: a card number',
    ]);
  });
});
