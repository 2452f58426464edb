import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { enqueueSyncs } from '../../jobs/sync/index.js';
import { cardsFor } from '../../src/mock-api/data.js';
import { tracingWanted } from '../../src/tracing/index.js';
import { ADMIN_TOKEN, API_KEY, CARD_TOKEN_KEYS, ok, useScriptedApi, workerEnv } from '../support/fixtures.js';
import { useCleanups, useTestDatabase } from '../support/helpers.js';
import { runCli, startCli, testQueue, waitFor } from '../support/queue-helpers.js';
import { type ReceivedSpan, startOtlpReceiver } from '../support/tracing/otlp-receiver.js';

// Tracing as an operator turns it on: the standard OTEL_* variables, a real OTLP/HTTP endpoint
// (a receiver decoding the JSON export), the CLI and a worker as separate processes.

const database = useTestDatabase();
const upstream = useScriptedApi();
const cleanups = useCleanups();
const RECORD_IMPORTS = new URL('../support/tracing/record-imports.mjs', import.meta.url).pathname;

let receiver: Awaited<ReturnType<typeof startOtlpReceiver>>;
beforeAll(async () => {
  receiver = await startOtlpReceiver();
});
afterAll(async () => {
  await receiver?.stop();
});

function setup(extra: Record<string, string> = {}) {
  const q = testQueue();
  cleanups.push(q.cleanup);
  const env = workerEnv(
    { databaseUrl: database.url, redisUrl: inject('redisUrl'), prefix: q.prefix, apiUrl: upstream.url },
    { CARDS_API_TIMEOUT_MS: '5000', SYNC_ATTEMPTS: '3', LOG_LEVEL: 'info', ...extra },
  );
  return { ...q, env };
}

const tracingEnv = () => ({
  OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
  OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
  OTEL_BSP_SCHEDULE_DELAY: '100',
  OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=test',
});

/** The modules a CLI run resolved, in order (test/support/tracing/record-imports.mjs). */
function importsFile(): { env: Record<string, string>; read: () => string[] } {
  const file = join(mkdtempSync(join(tmpdir(), 'cards-sync-imports-')), 'imports.txt');
  return {
    env: { NODE_OPTIONS: `--import=${RECORD_IMPORTS}`, RECORD_IMPORTS_FILE: file },
    read: () => readFileSync(file, 'utf8').trim().split('\n'),
  };
}

describe('tracingWanted', () => {
  it('is off with no OTEL_* variable, on with an endpoint or an exporter, off again when disabled', () => {
    expect(tracingWanted({})).toBe(false);
    expect(tracingWanted({ OTEL_SERVICE_NAME: 'x' })).toBe(false);
    expect(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(true);
    expect(tracingWanted({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces' })).toBe(true);
    expect(tracingWanted({ OTEL_TRACES_EXPORTER: 'console' })).toBe(true);
    expect(tracingWanted({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c' })).toBe(
      false,
    );
    expect(tracingWanted({ OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c' })).toBe(false);
  });
});

describe('tracing off', () => {
  it('loads no OpenTelemetry module at all: a worker that syncs imports pg, undici and pino, and nothing of OTel', async () => {
    const q = setup();
    const imports = importsFile();
    expect((await runCli(['enqueue', '--id', '62000'], { ...q.env, ...imports.env })).code).toBe(0);
    const run = await runCli(['worker', '--exit-when-idle'], { ...q.env, ...imports.env });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain('sync succeeded');
    const urls = imports.read();
    expect(urls.some((u) => u.includes('/node_modules/pg/'))).toBe(true);
    expect(urls.some((u) => u.includes('/node_modules/undici/'))).toBe(true);
    expect(urls.some((u) => u.includes('/node_modules/bullmq/'))).toBe(true);
    expect(
      urls.filter((u) =>
        /opentelemetry|bullmq-otel|import-in-the-middle|\/tracing\/(otel|sdk|preload)/.test(u),
      ),
    ).toEqual([]);
    // No trace_id in the logs either: nothing changed.
    expect(run.stderr).not.toContain('trace_id');
  });

  it('leaves the jobs as they were: no telemetry in any lane’s job options', async () => {
    const q = setup();
    for (const lane of ['ops', 'bulk'] as const) {
      const { jobIds } = await enqueueSyncs(
        q.queue,
        [{ subscriberId: lane === 'ops' ? 62_010 : 62_011 }],
        'manual',
        {
          lane,
        },
      );
      const job = await q.queue.getJob(jobIds[0]!);
      expect(job!.opts.telemetry, lane).toBeUndefined();
    }
  });
});

describe('tracing on', () => {
  it('one trace per sync from `enqueue` to the database row, across processes, with a retried 503 as two API attempts', async () => {
    const q = setup();
    const email = 'Trace.Me+otel@example.com';
    const emailCards = cardsFor(62_101);
    let n = 0;
    upstream.script.set('id:62100', () =>
      ++n === 1 ? { status: 503, body: { error: 'busy' } } : ok(cardsFor(62_100)),
    );
    upstream.script.set(`email:${email}`, ok(emailCards));
    const imports = importsFile();
    const env = { ...q.env, ...tracingEnv() };

    const enqueue = await runCli(['enqueue', '--id', '62100', '--email', email], env);
    expect(enqueue.code, enqueue.stderr).toBe(0);
    const worker = await runCli(['worker', '--exit-when-idle'], { ...env, ...imports.env });
    expect(worker.code, worker.stderr).toBe(0);

    // The instrumentations were registered before pg and pino were imported (measured, not assumed).
    const urls = imports.read();
    const first = (re: RegExp) => urls.findIndex((u) => re.test(u));
    expect(first(/instrumentation-pino/)).toBeGreaterThanOrEqual(0);
    expect(first(/instrumentation-pino/)).toBeLessThan(first(/\/node_modules\/pino\//));
    expect(first(/instrumentation-pg/)).toBeLessThan(first(/\/node_modules\/pg\//));

    const spans = receiver.spans;
    const byId = new Map<string, ReceivedSpan>(spans.map((s) => [s.spanId, s]));
    const processOf = (id: number) =>
      waitFor(`two process spans for ${id}`, async () => {
        const p = spans.filter(
          (s) => s.name.startsWith('process') && s.attributes['cards_sync.subscriber'] === `id:${id}`,
        );
        return p.length >= 2 ? p : undefined;
      });
    const jobs = await processOf(62_100);
    const traceId = jobs[0]!.traceId;
    const inTrace = spans.filter((s) => s.traceId === traceId);
    // docs/trace.svg is drawn from this (bench/trace-chart.ts).
    if (process.env.TRACE_DUMP) writeFileSync(process.env.TRACE_DUMP, JSON.stringify(inTrace, null, 1));
    const ancestors = (s: ReceivedSpan): string[] => {
      const names: string[] = [];
      for (let p = byId.get(s.parentSpanId); p; p = byId.get(p.parentSpanId)) names.push(p.name);
      return names;
    };

    // enqueue (the CLI) → BullMQ's addBulk → each attempt's job span (the worker): one trace.
    const enqueueSpan = inTrace.find((s) => s.name === 'cards_sync.enqueue')!;
    expect(enqueueSpan).toBeDefined();
    expect(enqueueSpan.parentSpanId).toBe('');
    expect(enqueueSpan.attributes).toMatchObject({
      'cards_sync.trigger': 'manual',
      'cards_sync.lane': 'ops',
      'cards_sync.targets': 2,
    });
    expect(jobs.every((j) => j.traceId === traceId)).toBe(true);
    for (const j of jobs) expect(ancestors(j)).toContain('cards_sync.enqueue');
    const attempts = jobs.map((j) => j.attributes['cards_sync.attempt']).sort();
    expect(attempts).toEqual([1, 2]);
    const failed = jobs.find((j) => j.attributes['cards_sync.attempt'] === 1)!;
    const done = jobs.find((j) => j.attributes['cards_sync.attempt'] === 2)!;
    expect(failed.attributes).toMatchObject({
      'cards_sync.outcome': 'failed',
      'cards_sync.api.code': '503',
      'cards_sync.lane': 'ops',
      'cards_sync.trigger': 'manual',
      'cards_sync.subscriber_id': 62_100,
    });
    expect(done.attributes).toMatchObject({
      'cards_sync.outcome': 'succeeded',
      'cards_sync.cards_seen': cardsFor(62_100).length,
      'cards_sync.cards_changed': cardsFor(62_100).length,
    });

    // Two API attempts, each with undici's HTTP span under it: 503, then 200.
    const jobIds = new Set(jobs.map((j) => j.spanId));
    const apiSpans = inTrace.filter((s) => s.name === 'api.fetch_cards' && jobIds.has(s.parentSpanId));
    expect(apiSpans.map((s) => s.attributes['cards_sync.api.code']).sort()).toEqual(['200', '503']);
    for (const a of apiSpans) {
      const http = inTrace.find((s) => s.parentSpanId === a.spanId && s.name === 'GET')!;
      expect(http, 'undici span').toBeDefined();
      expect(http.attributes['http.response.status_code']).toBe(Number(a.attributes['cards_sync.api.code']));
      expect(a.attributes['cards_sync.api.retryable']).toBe(a.attributes['cards_sync.api.code'] === '503');
    }
    // The wait in the queue (the first attempt's), the cards the answer held, the write and its
    // Postgres transaction; BullMQ's completion of a job makes no span of its own.
    expect(failed.attributes['cards_sync.queue_wait_ms']).toBeGreaterThanOrEqual(0);
    expect(done.attributes['cards_sync.queue_wait_ms']).toBeUndefined();
    const answered = apiSpans.find((s) => s.attributes['cards_sync.api.code'] === '200')!;
    expect(answered.attributes['cards_sync.cards']).toBe(cardsFor(62_100).length);
    expect(inTrace.filter((s) => s.name.startsWith('complete '))).toEqual([]);
    const write = inTrace.find((s) => s.name === 'db.write_cards')!;
    expect(write.attributes['cards_sync.batch_size']).toBeGreaterThanOrEqual(1);
    const batch = spans.find(
      (s) =>
        s.name === 'db.group_commit' &&
        (s.parentSpanId === write.spanId || s.links.some((l) => l.spanId === write.spanId)),
    )!;
    expect(batch, 'the group commit of the write').toBeDefined();
    expect(batch.attributes['cards_sync.batch_size']).toBe(write.attributes['cards_sync.batch_size']);
    const pg = spans.filter(
      (s) => s.parentSpanId === batch.spanId && s.attributes['db.system.name'] === 'postgresql',
    );
    expect(pg.length).toBeGreaterThan(0);
    // Postgres never sees a parameter's value exported: the query text only.
    for (const s of spans.filter((x) => x.attributes['db.system.name'] === 'postgresql')) {
      expect(
        Object.keys(s.attributes).filter((k) => k.includes('parameter') || k.includes('values')),
      ).toEqual([]);
    }

    // The e-mail's sync: its own job in the same enqueue, named by the keyed hash.
    const emailJob = await waitFor('the e-mail job span', async () =>
      spans.find(
        (s) =>
          s.name.startsWith('process') && String(s.attributes['cards_sync.subscriber']).startsWith('email:'),
      ),
    );
    expect(emailJob.attributes['cards_sync.outcome']).toBe('succeeded');

    // The resource: the standard variables and the service's own name and version.
    const w = spans.find((s) => s.name.startsWith('process'))!;
    expect(w.service).toBe('cards-sync');
    expect(w.raw.find((a) => a.key === 'deployment.environment.name')?.value).toEqual({
      stringValue: 'test',
    });

    // Every exported attribute: no e-mail, token, key or card number anywhere.
    const secrets = [
      email.toLowerCase(),
      encodeURIComponent(email).toLowerCase(),
      'trace.me',
      API_KEY,
      CARD_TOKEN_KEYS.split(':')[1]!,
      ...[...cardsFor(62_100), ...emailCards].flatMap((c) => [
        c.cardToken,
        c.binNumber,
        c.binNumber.slice(-4) === '0000' ? c.binNumber : c.binNumber.replace(/x/g, ''),
      ]),
    ];
    const values = spans
      .flatMap((s) => [s.name, ...s.raw.map((a) => JSON.stringify(a.value))])
      .map((v) => v.toLowerCase());
    expect(values.length).toBeGreaterThan(100);
    for (const secret of secrets) {
      expect(
        values.filter((v) => v.includes(secret.toLowerCase())),
        secret,
      ).toEqual([]);
    }

    // Log lines carry the trace: an operator jumps from the line to its trace.
    const lines = worker.stderr
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const synced = lines.filter((l) => l.msg === 'sync succeeded' && String(l.jobId).startsWith('id:62100:'));
    expect(synced.map((l) => [l.trace_id, l.span_id])).toEqual([[traceId, done.spanId]]);
    const retried = lines.find((l) => l.msg === 'job will be retried')!;
    expect(retried.trace_id).toBe(traceId);
  });

  it('a worker says at start, in one line, that an endpoint without a scheme is not used', async () => {
    const q = setup();
    const run = await runCli(['worker', '--exit-when-idle'], {
      ...q.env,
      OTEL_EXPORTER_OTLP_ENDPOINT: '127.0.0.1:4830',
    });
    expect(run.code, run.stderr).toBe(0);
    const lines = run.stderr
      .split('\n')
      .filter((l) => l.includes('OTEL_EXPORTER_OTLP'))
      .map((l) => JSON.parse(l) as { level: number; msg: string });
    expect(lines).toEqual([
      expect.objectContaining({
        level: 40,
        msg: 'tracing: OTEL_EXPORTER_OTLP_ENDPOINT is not used, it has no scheme (write http://127.0.0.1:4830): the SDK sends traces to its default (localhost:4318) instead',
      }),
    ]);
  });

  it('POST /api/resync continues its caller’s trace (W3C traceparent)', async () => {
    const q = setup();
    const serve = startCli(['serve'], { ...q.env, ...tracingEnv(), ADMIN_PORT: '0', ADMIN_TOKEN });
    cleanups.push(async () => {
      if (serve.process.exitCode === null) serve.process.kill('SIGKILL');
      await serve.done;
    });
    const url = await waitFor(
      'the admin server',
      async () => /admin server on (http:\/\/\S+)/.exec(serve.stdout())?.[1],
    );
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const caller = '00f067aa0ba902b7';
    const res = await fetch(`${url}/api/resync`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${ADMIN_TOKEN}`,
        'content-type': 'application/json',
        traceparent: `00-${traceId}-${caller}-01`,
      },
      body: JSON.stringify({ subscriberIds: [62_200] }),
    });
    expect(res.status).toBe(202);
    serve.process.kill('SIGTERM');
    await serve.done;
    const server = await waitFor('the request span', async () =>
      receiver.spans.find((s) => s.traceId === traceId && s.name === 'POST /api/resync'),
    );
    expect(server.parentSpanId).toBe(caller);
    const enqueue = receiver.spans.find((s) => s.traceId === traceId && s.name === 'cards_sync.enqueue')!;
    expect(enqueue.parentSpanId).toBe(server.spanId);
    expect(enqueue.attributes).toMatchObject({ 'cards_sync.trigger': 'api', 'cards_sync.lane': 'ops' });
    const [job] = await q.queue.getJobs(['waiting']);
    expect(job!.opts.telemetry?.metadata).toContain(traceId);
  });
});
