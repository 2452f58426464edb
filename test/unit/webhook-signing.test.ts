import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import {
  newWebhookSecret,
  secretKey,
  signedHeaders,
  WebhookSecretError,
} from '../../src/webhooks/signing.js';

const now = () => Math.floor(Date.now() / 1000);
const body = JSON.stringify({
  id: 'evt_1',
  type: 'card.added',
  timestamp: '2026-11-26T10:00:00.123Z',
  data: { x: 'ü' },
});

describe('Standard Webhooks signing, checked by the standardwebhooks package', () => {
  it('a signed body verifies under its secret and carries the three headers', () => {
    const secret = newWebhookSecret();
    const headers = signedHeaders([secret], 'evt_1', now(), body);
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(new Webhook(secret).verify(body, { ...headers })).toEqual(JSON.parse(body));
  });

  it('during a rotation both secrets verify, and a third does not', () => {
    const [current, previous, other] = [newWebhookSecret(), newWebhookSecret(), newWebhookSecret()];
    const headers = signedHeaders([current, previous], 'evt_2', now(), body);
    expect(headers['webhook-signature'].split(' ')).toHaveLength(2);
    expect(new Webhook(current).verify(body, { ...headers })).toBeTruthy();
    expect(new Webhook(previous).verify(body, { ...headers })).toBeTruthy();
    expect(() => new Webhook(other).verify(body, { ...headers })).toThrow(WebhookVerificationError);
  });

  it('an altered body, id or timestamp fails verification', () => {
    const secret = newWebhookSecret();
    const t = now();
    const headers = signedHeaders([secret], 'evt_3', t, body);
    const wh = new Webhook(secret);
    expect(() => wh.verify(`${body} `, { ...headers })).toThrow(WebhookVerificationError);
    expect(() => wh.verify(body, { ...headers, 'webhook-id': 'evt_4' })).toThrow(WebhookVerificationError);
    expect(() => wh.verify(body, { ...headers, 'webhook-timestamp': String(t - 1) })).toThrow(
      WebhookVerificationError,
    );
  });

  it('refuses malformed secrets and ids without echoing the secret', () => {
    expect(() => secretKey('sk_abc')).toThrow(WebhookSecretError);
    expect(() => secretKey('whsec_c2hvcnQ=')).toThrow(/24 to 64 bytes \(this one 5\)/);
    expect(() => signedHeaders([], 'evt', now(), body)).toThrow(/no secret/);
    expect(() => signedHeaders([newWebhookSecret()], 'evt\r\nx: y', now(), body)).toThrow(/printable/);
    expect(secretKey(newWebhookSecret())).toHaveLength(32);
  });
});
