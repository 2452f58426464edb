import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { tracingCheck } from '../../src/cli/doctor-tracing.js';
import { CARD_TOKEN_KEYS } from '../support/fixtures.js';
import { useTestDatabase } from '../support/helpers.js';
import { runCli } from '../support/queue-helpers.js';

// `cards-sync doctor`'s tracing line: whether the OTEL_* variables turn tracing on, where traces
// go, and whether that endpoint takes an export, against a real OTLP/HTTP endpoint on loopback
// that answers as it is told. A vendor's key in OTEL_EXPORTER_OTLP_HEADERS is sent, never printed.

const database = useTestDatabase();

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
}
const received: Received[] = [];
let answer = 200;
let url: string;
const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    received.push({ path: req.url ?? '', headers: req.headers });
    res.writeHead(answer, { 'content-type': 'application/json' }).end('{}');
  });
});
beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise((resolve) => server.close(resolve)));
beforeEach(() => {
  received.length = 0;
  answer = 200;
});

/**
 * Runs `fn` with exactly `vars` as this process's OTEL_* variables: the SDK's exporter reads
 * process.env itself, as it does in the worker.
 */
async function withOtel<T>(vars: Record<string, string>, fn: () => Promise<T>): Promise<T> {
  const saved = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('OTEL_')));
  for (const k of Object.keys(saved)) delete process.env[k];
  Object.assign(process.env, vars);
  try {
    return await fn();
  } finally {
    for (const k of Object.keys(vars)) delete process.env[k];
    Object.assign(process.env, saved);
  }
}

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

  it('on: the SDK’s own exporter sends an empty export to <endpoint>/v1/traces with the headers; no secret printed', async () => {
    const check = await withOtel(
      {
        OTEL_EXPORTER_OTLP_ENDPOINT: `${url.replace('http://', 'http://ops:endpoint-password-77@')}/`,
        OTEL_EXPORTER_OTLP_HEADERS: 'x-honeycomb-team=vendor%20key,x-other=2',
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.1',
      },
      () => tracingCheck(),
    );
    expect(check).toEqual({
      verdict: 'ok',
      name: 'tracing',
      says: `on: OTLP http/protobuf to ${url.slice(7)}/v1/traces; sampler parentbased_traceidratio 0.1; service cards-sync; it takes an export`,
    });
    expect(received).toHaveLength(1);
    expect(received[0]!.path).toBe('/v1/traces');
    expect(received[0]!.headers['content-type']).toBe('application/x-protobuf');
    expect(received[0]!.headers['x-honeycomb-team']).toBe('vendor key');
    expect(check.says).not.toContain('vendor');
    expect(check.says).not.toContain('endpoint-password-77');
  });

  it('the signal’s own endpoint as it is (a path of another shape not shown), OTLP/JSON, other exporters named', async () => {
    const check = await withOtel(
      {
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${url}/ingest/t0ken-in-path`,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_TRACES_EXPORTER: 'otlp,console',
        OTEL_SERVICE_NAME: 'cards-sync-eu',
      },
      () => tracingCheck(),
    );
    expect(check).toEqual({
      verdict: 'ok',
      name: 'tracing',
      says: `on: OTLP http/json to ${url.slice(7)}/… (and console); sampler parentbased_always_on; service cards-sync-eu; it takes an export`,
    });
    expect(received.map((r) => [r.path, r.headers['content-type']])).toEqual([
      ['/ingest/t0ken-in-path', 'application/json'],
    ]);
  });

  it('warns when the endpoint refuses, cannot be reached, or the protocol is not one the SDK knows', async () => {
    answer = 401;
    const refused = await withOtel({ OTEL_EXPORTER_OTLP_ENDPOINT: url }, () => tracingCheck());
    expect(refused.verdict).toBe('WARN');
    expect(refused.says).toMatch(
      /it did not take an export \(HTTP 401\): check OTEL_EXPORTER_OTLP_HEADERS \(the vendor key\): traces are dropped until it does$/,
    );

    const closed = await withOtel({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:1' }, () =>
      tracingCheck(),
    );
    expect(closed.verdict).toBe('WARN');
    expect(closed.says).toMatch(
      /to 127\.0\.0\.1:1\/v1\/traces; .*it did not take an export \(ECONNREFUSED\)/,
    );

    const notHttp = await withOtel({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, () => tracingCheck());
    expect(notHttp.verdict).toBe('WARN');
    expect(notHttp.says).toMatch(
      /to an endpoint that is not an http:\/\/ or https:\/\/ URL; .*\(ERR_INVALID_PROTOCOL\)/,
    );
    expect(notHttp.says).toMatch(
      /; OTEL_EXPORTER_OTLP_ENDPOINT has no scheme \(write http:\/\/collector:4318\): the SDK takes collector: for one and sends nothing$/,
    );

    const protocol = await withOtel(
      { OTEL_EXPORTER_OTLP_ENDPOINT: url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http' },
      () => tracingCheck(),
    );
    expect(protocol.verdict).toBe('WARN');
    expect(protocol.says).toMatch(/the protocol http is not one the SDK knows .*: it uses http\/protobuf$/);
  });

  it('warns when the sampler asked for is not the one in effect, naming the one the SDK falls back to', async () => {
    const sampler = (vars: Record<string, string>) =>
      withOtel({ OTEL_EXPORTER_OTLP_ENDPOINT: url, ...vars }, () => tracingCheck());

    const unknown = await sampler({ OTEL_TRACES_SAMPLER: 'bogus' });
    expect(unknown.verdict).toBe('WARN');
    expect(unknown.says).toMatch(
      /; sampler parentbased_always_on; .*; it takes an export; OTEL_TRACES_SAMPLER=bogus is not a sampler the SDK knows: it samples every trace \(parentbased_always_on\)$/,
    );

    const notNumber = await sampler({
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: 'abc',
    });
    expect(notNumber.verdict).toBe('WARN');
    expect(notNumber.says).toMatch(
      /; sampler parentbased_traceidratio 1; .*; OTEL_TRACES_SAMPLER_ARG=abc is not a ratio in \[0, 1\]: it samples every trace \(parentbased_traceidratio 1\)$/,
    );

    const outOfRange = await sampler({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '10' });
    expect(outOfRange.verdict).toBe('WARN');
    expect(outOfRange.says).toMatch(
      /OTEL_TRACES_SAMPLER_ARG=10 is not a ratio in \[0, 1\]: it samples every trace \(traceidratio 1\)$/,
    );

    // A ratio without the sampler that reads it: the SDK keeps everything.
    const unused = await sampler({ OTEL_TRACES_SAMPLER_ARG: '0.1' });
    expect(unused.verdict).toBe('WARN');
    expect(unused.says).toMatch(
      /OTEL_TRACES_SAMPLER_ARG=0\.1 is not used: parentbased_always_on takes no ratio \(parentbased_traceidratio does\): it samples every trace$/,
    );

    // Names are the specification's, in lower case, as the SDK compares them.
    const upper = await sampler({ OTEL_TRACES_SAMPLER: 'ALWAYS_OFF' });
    expect(upper.says).toMatch(
      /OTEL_TRACES_SAMPLER=ALWAYS_OFF is not a sampler the SDK knows: it samples every trace/,
    );

    await expect(
      sampler({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' }),
    ).resolves.toMatchObject({
      verdict: 'ok',
      says: expect.stringMatching(/; sampler traceidratio 0\.25; .*; it takes an export$/),
    });
    await expect(sampler({ OTEL_TRACES_SAMPLER: 'always_off' })).resolves.toMatchObject({
      verdict: 'ok',
      says: expect.stringMatching(/; sampler always_off; .*; it takes an export$/),
    });
  });

  it('says an endpoint without a scheme is not used, how to write it, and what the SDK sends to instead', async () => {
    const port = url.slice('http://127.0.0.1:'.length);
    const general = await withOtel({ OTEL_EXPORTER_OTLP_ENDPOINT: `127.0.0.1:${port}` }, () =>
      tracingCheck(),
    );
    expect(general.verdict).toBe('WARN');
    expect(general.says).toMatch(
      new RegExp(
        `^on: OTLP http/protobuf to localhost:4318/v1/traces; .*; OTEL_EXPORTER_OTLP_ENDPOINT is not used, it has no scheme \\(write http://127\\.0\\.0\\.1:${port}\\): the SDK sends traces to its default \\(localhost:4318\\) instead$`,
      ),
    );
    expect(received).toEqual([]);

    // The signal's own variable passed over: the general one is used, and the export reaches it.
    const specific = await withOtel(
      {
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `127.0.0.1:${port}/ingest/t0ken`,
        OTEL_EXPORTER_OTLP_ENDPOINT: url,
      },
      () => tracingCheck(),
    );
    expect(specific).toEqual({
      verdict: 'WARN',
      name: 'tracing',
      says:
        `on: OTLP http/protobuf to 127.0.0.1:${port}/v1/traces; sampler parentbased_always_on; service cards-sync; it takes an export; ` +
        `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is not used, it has no scheme (write http://127.0.0.1:${port}/…): the SDK sends traces to OTEL_EXPORTER_OTLP_ENDPOINT instead`,
    });
    expect(received.map((r) => r.path)).toEqual(['/v1/traces']);
  });

  it('in `cards-sync doctor` as an operator runs it, with tracing on: the line, the vendor key sent and never printed', async () => {
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
      /^ok\s+tracing\s+on: OTLP http\/protobuf to 127\.0\.0\.1:\d+\/v1\/traces; sampler parentbased_always_on; service cards-sync; it takes an export$/,
    );
    expect(received.some((r) => r.headers.authorization === 'Bearer vendor-key-5e1c')).toBe(true);
    expect(run.stdout + run.stderr).not.toContain('vendor-key-5e1c');
  });

  it('an endpoint that is no URL at all stops doctor and the worker at start: exit 2, one line naming it, the value not shown', async () => {
    const env = {
      DATABASE_URL: database.url,
      REDIS_URL: inject('redisUrl'),
      CARD_TOKEN_KEYS,
      CARDS_API_BASE_URL: 'http://127.0.0.1:1',
      CARDS_API_KEY: 'k',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'htp:/bad url-secret-9f2',
    };
    for (const command of [['doctor'], ['worker', '--exit-when-idle']]) {
      const run = await runCli(command, env);
      expect(run.code, command.join(' ')).toBe(2);
      expect(run.stdout).toBe('');
      expect(run.stderr.trim().split('\n')).toEqual([
        'cards-sync: OTEL_EXPORTER_OTLP_ENDPOINT must be a URL such as http://collector:4318 (got a value that is not one; not shown, it may hold a token): traces would go nowhere',
      ]);
    }
  });
});
