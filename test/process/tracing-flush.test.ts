import { createServer as createHttpServer } from 'node:http';
import { type AddressInfo, createServer, type Server, type Socket } from 'node:net';
import { describe, expect, inject, it } from 'vitest';
import { workerEnv } from '../support/fixtures.js';
import { useCleanups, useTestDatabase } from '../support/helpers.js';
import { runCli, testQueue, waitFor } from '../support/queue-helpers.js';

// A short command (here `enqueue`, which makes spans) with tracing on and a Collector that does
// not take its export: it gives the export about a second, not the SDK's 10 s of retries, says in
// one line that its spans were dropped, and exits with its own code. Real processes, real sockets
// on loopback: one port that refuses, one that accepts and never answers, one that answers 503.

const database = useTestDatabase();
const cleanups = useCleanups();

function setup(endpoint: string) {
  const q = testQueue();
  cleanups.push(q.cleanup);
  return workerEnv(
    {
      databaseUrl: database.url,
      redisUrl: inject('redisUrl'),
      prefix: q.prefix,
      apiUrl: 'http://127.0.0.1:9',
    },
    {
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
      // A vendor's key: sent with the export, never in the line.
      OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20vendor-key-9f3a',
    },
  );
}

async function listen(server: Server | ReturnType<typeof createHttpServer>): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return (server.address() as AddressInfo).port;
}

const tracingLines = (stderr: string) => stderr.split('\n').filter((l) => /tracing|OTLP|export/i.test(l));

describe('a short command whose spans the Collector does not take', () => {
  it('refused: exits 0 as without tracing, with one line naming the bound, the code and the host', async () => {
    const closed = createServer();
    const port = await listen(closed);
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const run = await runCli(['enqueue', '--id', '62300'], setup(`http://127.0.0.1:${port}/`));
    expect(run.code, run.stderr).toBe(0);
    expect(tracingLines(run.stderr)).toEqual([
      `tracing: spans not exported within 1 s (ECONNREFUSED at 127.0.0.1:${port}); dropped`,
    ]);
  });

  it('no answer: the exporter cuts its request off (the server sees the connection closed) and the line says so', async () => {
    const sockets: Socket[] = [];
    const closedByClient: Socket[] = [];
    // Accepts, reads, never answers, never closes: only the client can end the connection.
    const silent = createServer((socket) => {
      sockets.push(socket);
      socket.resume();
      socket.on('close', () => closedByClient.push(socket));
    });
    const port = await listen(silent);
    const run = await runCli(
      ['enqueue', '--id', '62301'],
      setup(`http://ops:endpoint-password-3@127.0.0.1:${port}/otlp/t0ken`),
    );
    expect(run.code, run.stderr).toBe(0);
    expect(tracingLines(run.stderr)).toEqual([
      `tracing: spans not exported within 1 s (no answer at 127.0.0.1:${port}); dropped`,
    ]);
    expect(sockets.length).toBeGreaterThan(0);
    await waitFor('the export connections closed', async () => closedByClient.length === sockets.length);
    expect(run.stdout + run.stderr).not.toMatch(/vendor-key|endpoint-password|t0ken/);
  });

  it('503 (retryable): the export is not retried past the bound', async () => {
    let requests = 0;
    const busy = createHttpServer((req, res) => {
      req.resume();
      req.on('end', () => {
        requests += 1;
        res.writeHead(503).end();
      });
    });
    const port = await listen(busy);
    const run = await runCli(['enqueue', '--id', '62302'], setup(`http://127.0.0.1:${port}`));
    expect(run.code, run.stderr).toBe(0);
    expect(tracingLines(run.stderr)).toEqual([
      `tracing: spans not exported within 1 s (asked to retry later at 127.0.0.1:${port}); dropped`,
    ]);
    // The SDK retries a 503 after 1 s, 1.5 s, 2.25 s… while its deadline allows: within a bound of
    // one second that is one retry at most (its first backoff is 0.8 to 1.2 s).
    expect(requests).toBeGreaterThanOrEqual(1);
    expect(requests).toBeLessThanOrEqual(2);
  });
});
