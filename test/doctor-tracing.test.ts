import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { tracingCheck } from '../src/commands/doctor-tracing.js';
import { CARD_TOKEN_KEYS } from './fixtures.js';
import { useTestDatabase } from './helpers.js';
import { runCli } from './queue-helpers.js';

// `cards-sync doctor`'s tracing line: whether the OTEL_* variables turn tracing on, where traces
// go, and whether that endpoint takes an export, against a real OTLP/HTTP endpoint on loopback
// that answers as it is told. A vendor's key in OTEL_EXPORTER_OTLP_HEADERS is sent, never printed.

const database = useTestDatabase();

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}
const received: Received[] = [];
let answer = 200;
let url: string;
const server = createServer((req, res) => {
  const parts: Buffer[] = [];
  req.on('data', (c: Buffer) => parts.push(c));
  req.on('end', () => {
    received.push({ path: req.url ?? '', headers: req.headers, body: Buffer.concat(parts).toString() });
    res.writeHead(answer, { 'content-type': 'application/json' }).end('{}');
  });
});
beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise((resolve) => server.close(resolve)));

describe("doctor's tracing check", () => {
  it('off: says why, and warns when OTEL_* variables are set without an endpoint', async () => {
    await expect(tracingCheck({})).resolves.toEqual({
      verdict: 'ok',
      name: 'tracing',
      says: 'off (no OTEL_* variable set)',
    });
    await expect(
      tracingCheck({ OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: url }),
    ).resolves.toMatchObject({
      verdict: 'ok',
      says: 'off (OTEL_SDK_DISABLED=true)',
    });
    // A typo in the endpoint's name: tracing stays off, and doctor says what is missing.
    const typo = await tracingCheck({ OTEL_SERVICE_NAME: 'billing', OTEL_EXPORTER_OTLP_ENDPIONT: url });
    expect(typo.verdict).toBe('WARN');
    expect(typo.says).toBe(
      'off, though OTEL_EXPORTER_OTLP_ENDPIONT, OTEL_SERVICE_NAME are set: no OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) says where traces go',
    );
    expect(received).toEqual([]);
  });

  it('on: posts an empty export to <endpoint>/v1/traces with the configured headers, and names no secret', async () => {
    received.length = 0;
    answer = 200;
    const withUser = url.replace('http://', 'http://ops:endpoint-password-77@');
    const check = await tracingCheck({
      OTEL_EXPORTER_OTLP_ENDPOINT: `${withUser}/`,
      OTEL_EXPORTER_OTLP_HEADERS: 'x-honeycomb-team=vendor%20key%2C1,x-other=2',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.1',
    });
    expect(check).toEqual({
      verdict: 'ok',
      name: 'tracing',
      says: `on: OTLP http/protobuf to ${url.slice(7)}/v1/traces; sampler parentbased_traceidratio 0.1; service cards-sync; it takes an export (HTTP 200)`,
    });
    expect(received).toHaveLength(1);
    expect(received[0]!.path).toBe('/v1/traces');
    expect(received[0]!.headers['content-type']).toBe('application/x-protobuf');
    expect(received[0]!.headers['x-honeycomb-team']).toBe('vendor key,1');
    expect(received[0]!.headers.authorization).toBe(
      `Basic ${Buffer.from('ops:endpoint-password-77').toString('base64')}`,
    );
    expect(received[0]!.body).toBe('');
    expect(check.says).not.toContain('vendor');
    expect(check.says).not.toContain('endpoint-password-77');
  });

  it('the signal’s own endpoint is used as it is; OTLP/JSON sends {}', async () => {
    received.length = 0;
    const check = await tracingCheck({
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${url}/custom/traces`,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_SERVICE_NAME: 'cards-sync-eu',
    });
    expect(check.verdict).toBe('ok');
    expect(check.says).toContain(`OTLP http/json to ${url.slice(7)}/custom/traces`);
    expect(check.says).toContain('service cards-sync-eu');
    expect(received.map((r) => [r.path, r.headers['content-type'], r.body])).toEqual([
      ['/custom/traces', 'application/json', '{}'],
    ]);
  });

  it('warns when the endpoint refuses, does not answer, or is not a URL: traces would be dropped', async () => {
    answer = 401;
    const refused = await tracingCheck({ OTEL_EXPORTER_OTLP_ENDPOINT: url });
    expect(refused.verdict).toBe('WARN');
    expect(refused.says).toMatch(/it refused an export \(HTTP 401\): check OTEL_EXPORTER_OTLP_HEADERS/);
    answer = 200;

    const closed = await tracingCheck({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:1' });
    expect(closed.verdict).toBe('WARN');
    expect(closed.says).toMatch(
      /to 127\.0\.0\.1:1\/v1\/traces; .*cannot connect: traces are dropped until it answers$/,
    );

    const notUrl = await tracingCheck({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' });
    expect(notUrl.verdict).toBe('WARN');
    expect(notUrl.says).toMatch(
      /the OTLP endpoint is not an http:\/\/ or https:\/\/ URL: fix OTEL_EXPORTER_OTLP_ENDPOINT/,
    );
  });

  it('in `cards-sync doctor` as an operator runs it, with tracing on: the line, the vendor key sent and never printed', async () => {
    received.length = 0;
    const run = await runCli(['doctor'], {
      DATABASE_URL: database.url,
      REDIS_URL: inject('redisUrl'),
      CARD_TOKEN_KEYS,
      OTEL_EXPORTER_OTLP_ENDPOINT: url,
      OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20vendor-key-5e1c',
    });
    expect(run.code, run.stdout + run.stderr).toBe(0);
    const line = run.stdout.split('\n').find((l) => /^(ok|WARN)\s+tracing\s/.test(l));
    expect(line).toMatch(
      /^ok\s+tracing\s+on: OTLP http\/protobuf to 127\.0\.0\.1:\d+\/v1\/traces; sampler parentbased_always_on; service cards-sync; it takes an export \(HTTP 200\)$/,
    );
    expect(received.some((r) => r.headers.authorization === 'Bearer vendor-key-5e1c')).toBe(true);
    expect(run.stdout + run.stderr).not.toContain('vendor-key-5e1c');
  });
});
