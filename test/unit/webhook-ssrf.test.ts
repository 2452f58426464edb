import type { LookupAddress } from 'node:dns';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWebhookSender, EXCERPT_CHARS } from '../../src/webhooks/deliver-http.js';
import { newWebhookSecret, signedHeaders } from '../../src/webhooks/signing.js';
import { assertPublicUrl, isPublicAddress, type Resolve } from '../../src/webhooks/ssrf.js';
import { startReceiver } from '../support/webhook-receiver.js';

const body = '{"id":"evt_1","type":"card.added","timestamp":"2026-11-26T10:00:00.000Z","data":{}}';
const secret = newWebhookSecret();
const headers = (id = 'evt_1') => signedHeaders([secret], id, Math.floor(Date.now() / 1000), body);

describe('which addresses a webhook may reach', () => {
  it.each([
    '127.0.0.1',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '224.0.0.1',
    '255.255.255.255',
    '198.18.0.1',
    '::',
    '::1',
    'fe80::1',
    'fc00::1',
    'fd12:3456::1',
    'ff02::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:10.0.0.1',
    '64:ff9b::a9fe:a9fe',
    '2002:7f00:1::1',
    '::127.0.0.1',
    'not-an-address',
  ])('%s is refused', (address) => {
    expect(isPublicAddress(address)).toBe(false);
  });

  it.each([
    '93.184.216.34',
    '8.8.8.8',
    '172.32.0.1',
    '100.128.0.1',
    '2606:4700::1111',
    '::ffff:8.8.8.8',
    '2001:4860::8888',
  ])('%s is allowed', (address) => {
    expect(isPublicAddress(address)).toBe(true);
  });

  it('a name that resolves to loopback is refused at add time, with a message that says what to do', async () => {
    await expect(assertPublicUrl(new URL('http://localhost:9/x'))).rejects.toThrow(
      /localhost \((127\.0\.0\.1|::1)\) is loopback, private, link-local or reserved: refused \(set WEBHOOK_ALLOW_PRIVATE=true/,
    );
    await expect(assertPublicUrl(new URL('http://[::ffff:169.254.169.254]/'))).rejects.toThrow(/refused/);
    await expect(assertPublicUrl(new URL('http://0x7f000001/'))).rejects.toThrow(/127\.0\.0\.1/);
  });
});

describe('one webhook POST against a real receiver', () => {
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  const sender = createWebhookSender({ timeoutMs: 1500, allowPrivate: true });
  beforeAll(async () => {
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await sender.close();
    await receiver.close();
  });

  it('a 2xx is delivered, and what arrives verifies with standardwebhooks', async () => {
    receiver.answer((_r, res) => res.writeHead(204).end());
    const result = await sender.post(`${receiver.url}/hook?x=1`, headers(), body);
    expect(result).toMatchObject({ delivered: true, status: 204, errorCode: null });
    const got = receiver.received.at(-1)!;
    expect(got.path).toBe('/hook?x=1');
    expect(got.headers['content-type']).toBe('application/json');
    expect(new Webhook(secret).verify(got.body, got.headers as Record<string, string>)).toBeTruthy();
  });

  it('a 500 fails with a capped, redacted excerpt; Retry-After in seconds or as a date is read', async () => {
    receiver.answer((_r, res) =>
      res
        .writeHead(500, { 'retry-after': '7' })
        .end(`boom card 4111 1111 1111 1111 mail a@b.example ${'x'.repeat(200_000)}`),
    );
    const result = await sender.post(receiver.url, headers(), body);
    expect(result).toMatchObject({
      delivered: false,
      status: 500,
      errorCode: 'http_status',
      retryAfterMs: 7000,
    });
    expect(result.excerpt.length).toBeLessThanOrEqual(EXCERPT_CHARS + 1);
    expect(result.excerpt).not.toContain('4111');
    expect(result.excerpt).not.toContain('a@b.example');
    const at = new Date(Date.now() + 30_000).toUTCString();
    receiver.answer((_r, res) => res.writeHead(503, { 'retry-after': at }).end());
    const dated = await sender.post(receiver.url, headers(), body);
    expect(dated.retryAfterMs).toBeGreaterThan(25_000);
    expect(dated.retryAfterMs).toBeLessThanOrEqual(30_000);
  });

  it('a redirect is not followed: the attempt fails and the target is never asked', async () => {
    receiver.answer((r, res) =>
      r.path === '/elsewhere' ? res.end('ok') : res.writeHead(307, { location: '/elsewhere' }).end(),
    );
    const before = receiver.received.length;
    const result = await sender.post(`${receiver.url}/start`, headers(), body);
    expect(result).toMatchObject({ delivered: false, status: 307, errorCode: 'redirect' });
    expect(result.excerpt).toMatch(/redirect not followed/);
    expect(receiver.received.slice(before).map((r) => r.path)).toEqual(['/start']);
  });

  it('a receiver that never answers is cut at the whole deadline', async () => {
    receiver.answer(() => {});
    const started = Date.now();
    const result = await sender.post(receiver.url, headers(), body);
    expect(result).toMatchObject({ delivered: false, status: null, errorCode: 'timeout' });
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('a refused connection is a failure, not a throw', async () => {
    const closed = await startReceiver();
    await closed.close();
    const result = await sender.post(closed.url, headers(), body);
    expect(result).toMatchObject({ delivered: false, status: null, errorCode: 'connect' });
  });
});

describe('the guard holds at connect time', () => {
  it('a loopback literal is refused without WEBHOOK_ALLOW_PRIVATE, and nothing is sent', async () => {
    const receiver = await startReceiver();
    const sender = createWebhookSender({ timeoutMs: 1500, allowPrivate: false });
    try {
      const result = await sender.post(receiver.url, headers(), body);
      expect(result).toMatchObject({ delivered: false, errorCode: 'address_refused' });
      expect(result.excerpt).toMatch(/WEBHOOK_ALLOW_PRIVATE|not public/);
      const named = await sender.post(`http://localhost:${receiver.port}/`, headers(), body);
      expect(named).toMatchObject({ delivered: false, errorCode: 'address_refused' });
      expect(receiver.received).toHaveLength(0);
    } finally {
      await sender.close();
      await receiver.close();
    }
  });

  it('DNS rebinding: a name that was public when checked and loopback when connecting is refused', async () => {
    const receiver = await startReceiver();
    let calls = 0;
    const rebinding: Resolve = (_host, callback) => {
      calls++;
      const address: LookupAddress =
        calls === 1 ? { address: '93.184.216.34', family: 4 } : { address: '127.0.0.1', family: 4 };
      callback(null, [address]);
    };
    const sender = createWebhookSender({ timeoutMs: 1500, allowPrivate: false, resolve: rebinding });
    try {
      const url = `http://hooks.example.test:${receiver.port}/`;
      await expect(assertPublicUrl(new URL(url), rebinding)).resolves.toBeUndefined();
      const result = await sender.post(url, headers(), body);
      expect(result).toMatchObject({ delivered: false, errorCode: 'address_refused' });
      expect(result.excerpt).toMatch(/hooks\.example\.test \(127\.0\.0\.1\)/);
      expect(receiver.received).toHaveLength(0);
    } finally {
      await sender.close();
      await receiver.close();
    }
  });
});
