import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Webhook } from 'standardwebhooks';
import { expect, it } from 'vitest';
import { enqueueSyncs } from '../../jobs/sync/queue.js';
import { type ChangeEvent, FEED_START, MAX_LIMIT, readFeed } from '../../src/events/index.js';
import { parseKeyRing } from '../../src/tokens/keyring.js';
import { insertEndpoint } from '../../src/webhooks/endpoint-secrets.js';
import { feedHead } from '../../src/webhooks/fanout.js';
import { CARD_TOKEN_KEYS } from '../support/fixtures.js';
import { useCleanups, useTestDatabase } from '../support/helpers.js';
import { type CliProcess, waitFor } from '../support/queue-helpers.js';
import { recordFaultRow } from './report.js';
import { startScenario } from './scenario.js';
import { proxyDatabase } from './tcp-proxy.js';

// Webhook delivery under faults. Real syncs against a mock API whose wallets
// keep changing write change events; two worker processes deliver them to a loopback receiver that
// answers 500 to a fifth of the deliveries (seeded), and is down (connection refused) for 30 s.
// One worker is SIGKILLed twice while the receiver holds its requests open, and started again each
// time; Postgres restarts once (through the proxy: every connection reset, reconnects refused for
// a few seconds, as a restart looks to its clients). At the end every event of the feed has been
// answered 2xx at least once, every request verifies with the standardwebhooks package, every
// redelivery carries the event's webhook-id and the same body, and each subscriber's events first
// arrived in feed (commit) order.
//
// The workers run with a retry schedule of seconds (worker-short-retries.mjs): the default one, 5 s
// doubling, would draw retries minutes past the outage's end.

const database = useTestDatabase();
const cleanups = useCleanups();
const SUBSCRIBERS = 100;
const FIRST_ID = 11_000_000;
const OUTAGE_MS = 30_000;
const FAIL_SHARE = 0.2;
const WORKER_BIN = fileURLToPath(new URL('./worker-short-retries.mjs', import.meta.url));

interface Receipt {
  eventId: string;
  headerId: string;
  body: string;
  verified: boolean;
  subscriberId: number | undefined;
  /** 2xx answered and written to a live connection. */
  accepted: boolean;
}

/** mulberry32: the receiver's 500s are the same draws on every run. */
function seeded(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A receiver that fails a share of deliveries, can hold answers open, and can go down and come back on its port. */
async function startFaultyReceiver(secret: string) {
  const wh = new Webhook(secret);
  const random = seeded(37);
  const receipts: Receipt[] = [];
  const held = new Map<string, () => void>();
  const sockets = new Set<Socket>();
  let holding = false;
  let failed = 0;
  const answer = (r: Receipt, res: ServerResponse, status: number) => {
    if (res.destroyed || res.socket?.destroyed) return;
    res.on('finish', () => {
      if (status < 300) r.accepted = true;
    });
    res.writeHead(status).end();
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const headerId = String(req.headers['webhook-id']);
      let verified = false;
      let event: ChangeEvent | undefined;
      try {
        // Verified as it arrives: the signature's timestamp is checked against the clock (5 min).
        event = wh.verify(body, req.headers as Record<string, string>) as ChangeEvent;
        verified = true;
      } catch {}
      const r: Receipt = {
        eventId: event?.id ?? '',
        headerId,
        body,
        verified,
        subscriberId: event === undefined ? undefined : Number(event.data.subscriberId),
        accepted: false,
      };
      receipts.push(r);
      if (holding) {
        const release = () => {
          held.delete(headerId);
          answer(r, res, 200);
        };
        held.set(headerId, release);
        // Below WEBHOOK_TIMEOUT_MS: a request held this long is answered, not given up.
        setTimeout(release, 4000).unref();
      } else if (random() < FAIL_SHARE) {
        failed++;
        answer(r, res, 500);
      } else {
        answer(r, res, 200);
      }
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
  await listen(0);
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    receipts,
    failed: () => failed,
    /** Answers hold open (up to 4 s) until `release()`. */
    hold() {
      holding = true;
    },
    heldIds: () => [...held.keys()],
    release() {
      holding = false;
      for (const r of [...held.values()]) r();
    },
    /** Stops listening: new connections are refused, open ones reset. */
    down: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      }),
    up: () => listen(port),
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        if (!server.listening) return resolve();
        server.close(() => resolve());
      }),
  };
}

it('webhook faults: 500s, a 30 s outage, two SIGKILLs mid-delivery and a Postgres restart lose nothing and keep each subscriber in order', async () => {
  const started = Date.now();
  const phase = (what: string) =>
    process.stdout.write(
      `webhook faults: ${what} at ${Math.round((Date.now() - started) / 1000)} s, ${receiver.receipts.filter((r) => r.accepted).length} accepted\n`,
    );
  const pool = database.handle.pool;
  const { id: endpointId, secret } = await insertEndpoint(pool, parseKeyRing(CARD_TOKEN_KEYS), {
    url: 'http://127.0.0.1:1/unset',
    description: 'fault test',
    eventTypes: null,
    feedCursor: await feedHead(pool),
  });
  const receiver = await startFaultyReceiver(secret);
  cleanups.push(() => receiver.close());
  await pool.query('update webhook_endpoints set url = $2 where id = $1', [
    endpointId,
    `${receiver.url}/cards`,
  ]);
  const { proxy, url } = await proxyDatabase(database.url);
  cleanups.push(() => proxy.close());
  const s = await startScenario({
    db: database,
    cleanups,
    subscribers: SUBSCRIBERS,
    firstId: FIRST_ID,
    // Every wallet changes about twice a minute: rounds of syncs keep writing events.
    apiArgs: ['--latency-ms', '2', '--changes', '1:2/m'],
    // Ten attempts 50 ms apart, doubling: the syncs outlast the Postgres restart.
    attempts: 10,
    env: {
      DATABASE_URL: url,
      WEBHOOK_ALLOW_PRIVATE: 'true',
      CHANGE_EVENTS: 'on',
      WEBHOOK_TIMEOUT_MS: '5000',
    },
  });
  const startWorker = () => s.start(['worker', '--concurrency', '8'], {}, WORKER_BIN);
  const workers: CliProcess[] = [startWorker(), startWorker()];

  // Rounds of syncs every 10 s until the faults are over: events keep coming through all of them.
  let generating = true;
  const generator = (async () => {
    while (generating) {
      await new Promise((r) => setTimeout(r, 10_000));
      if (generating)
        await enqueueSyncs(
          s.queue,
          s.ids.map((subscriberId) => ({ subscriberId })),
          'manual',
        );
    }
  })();
  cleanups.push(async () => {
    generating = false;
    await generator;
  });

  const accepted = () => receiver.receipts.filter((r) => r.accepted).length;
  await waitFor('the first deliveries', async () => accepted() >= 200, 90_000);

  /** SIGKILLs worker 0 while the receiver holds requests it has in flight; starts another. */
  let inFlightAtKills = 0;
  const killMidDelivery = async () => {
    const victim = workers[0]!;
    receiver.hold();
    const pid = victim.process.pid!;
    const caught = await waitFor(
      'worker 0 to have deliveries held open at the receiver',
      async () => {
        const held = receiver.heldIds();
        if (held.length === 0) return false;
        const { rows } = await pool.query<{ event_id: string }>(
          `select event_id from webhook_deliveries
           where status = 'pending' and locked_until > now() and locked_by like $1 and event_id = any($2)`,
          [`%:${pid}:%`, held],
        );
        return rows.length > 0 ? rows.length : false;
      },
      120_000,
    );
    victim.process.kill('SIGKILL');
    await victim.done;
    inFlightAtKills += caught;
    receiver.release();
    workers[0] = startWorker();
  };

  phase('first deliveries');
  await killMidDelivery();
  phase('first kill');

  // The outage: connections refused for 30 s while syncs go on writing events.
  await receiver.down();
  const atDown = receiver.receipts.length;
  await new Promise((r) => setTimeout(r, OUTAGE_MS));
  expect(receiver.receipts.length).toBe(atDown);
  await receiver.up();
  phase('outage over');
  const refused = await pool.query<{ n: number }>(
    "select count(*)::int as n from webhook_attempts where endpoint_id = $1 and error_code = 'connect'",
    [endpointId],
  );

  // Postgres restarts while the backlog goes out.
  const before = accepted();
  await waitFor('deliveries after the outage', async () => accepted() >= before + 50, 90_000);
  for (const w of workers) expect(w.process.exitCode, w.stderr().slice(-1500)).toBeNull();
  proxy.cut();
  await new Promise((r) => setTimeout(r, 3000));
  proxy.restore();

  phase('Postgres restarted');
  await killMidDelivery();
  phase('second kill');
  generating = false;
  await generator;

  await s.drained(120_000, workers);
  const expected: ChangeEvent[] = [];
  for (let after = FEED_START; ; ) {
    const page = await readFeed(pool, { after, limit: MAX_LIMIT });
    expected.push(...page.events);
    after = page.next;
    if (page.events.length < MAX_LIMIT) break;
  }
  const stored = await pool.query<{ n: number }>('select count(*)::int as n from change_events');
  expect(expected.length).toBe(stored.rows[0]!.n);
  const missing = () => {
    const got = new Set(receiver.receipts.filter((r) => r.accepted).map((r) => r.eventId));
    return expected.filter((e) => !got.has(e.id)).map((e) => e.id);
  };
  phase('drained');
  try {
    await waitFor('every event answered 2xx', async () => missing().length === 0, 150_000);
  } catch (error) {
    const state = await pool.query(
      `select d.event_id, d.status, d.attempts, d.locked_by, d.locked_until, d.next_attempt_at, now() as now
       from webhook_deliveries d where d.event_id = any($1) limit 10`,
      [missing()],
    );
    const cursor = await pool.query('select feed_cursor, enabled from webhook_endpoints');
    throw new Error(
      `${(error as Error).message}: ${missing().length} missing; ${JSON.stringify(state.rows)} ${JSON.stringify(cursor.rows)}`,
    );
  }
  phase('all answered');
  for (const w of workers) w.process.kill('SIGTERM');
  for (const w of workers) {
    const run = await w.done;
    expect(run.code, run.stderr.slice(-2000)).toBe(0);
  }

  // Every request verifies; every redelivery is the event's id and the same bytes.
  const receipts = receiver.receipts;
  expect(receipts.filter((r) => !r.verified)).toEqual([]);
  const byEvent = new Map<string, Receipt[]>();
  for (const r of receipts) byEvent.set(r.eventId, [...(byEvent.get(r.eventId) ?? []), r]);
  let differing = 0;
  for (const [eventId, all] of byEvent) {
    for (const r of all) if (r.headerId !== eventId || r.body !== all[0]!.body) differing++;
  }
  expect(differing).toBe(0);
  expect([...byEvent.keys()].sort()).toEqual(expected.map((e) => e.id).sort());
  // Per subscriber, first arrivals in feed order.
  const firsts = new Map<number, string[]>();
  const seen = new Set<string>();
  for (const r of receipts) {
    if (seen.has(r.eventId)) continue;
    seen.add(r.eventId);
    firsts.set(r.subscriberId!, [...(firsts.get(r.subscriberId!) ?? []), r.eventId]);
  }
  const feedOrder = new Map<number, string[]>();
  for (const e of expected) {
    const sub = Number(e.data.subscriberId);
    feedOrder.set(sub, [...(feedOrder.get(sub) ?? []), e.id]);
  }
  let outOfOrder = 0;
  for (const [sub, ids] of feedOrder)
    if (JSON.stringify(firsts.get(sub)) !== JSON.stringify(ids)) outOfOrder++;
  expect(outOfOrder).toBe(0);
  // Nothing lost, nothing dead-lettered: one delivered row per event.
  const rows = await pool.query<{ status: string; n: number }>(
    'select status, count(*)::int as n from webhook_deliveries where endpoint_id = $1 group by 1',
    [endpointId],
  );
  expect(Object.fromEntries(rows.rows.map((r) => [r.status, r.n]))).toEqual({ delivered: expected.length });
  expect(await s.queue.getJobCounts('failed')).toEqual({ failed: 0 });

  const duplicates = receipts.length - byEvent.size;
  const lost = expected.filter((e) => !byEvent.has(e.id)).length;
  const summary = {
    events: expected.length,
    subscribers: feedOrder.size,
    requests: receipts.length,
    duplicates,
    answered500: receiver.failed(),
    refusedAttempts: refused.rows[0]!.n,
    inFlightAtKills,
    postgresResets: proxy.resets,
    seconds: Math.round((Date.now() - started) / 1000),
  };
  process.stdout.write(`webhook faults: ${JSON.stringify(summary)}\n`);
  recordFaultRow({
    scenario: 'webhook delivery',
    faults:
      `receiver 500 to ${summary.answered500} of ${summary.requests} requests (${FAIL_SHARE * 100}%), ` +
      `down ${OUTAGE_MS / 1000} s (${summary.refusedAttempts} attempts refused); 2 × SIGKILL of a worker ` +
      `mid-delivery (${inFlightAtKills} deliveries in flight), restarted; 1 × Postgres restart ` +
      `(${proxy.resets} connections reset); ${summary.events} events, ${duplicates} redelivered (same id and body)`,
    faultCount: 4 + summary.answered500 + summary.refusedAttempts,
    jobs: summary.events,
    subscribersChecked: summary.subscribers,
    lost,
    duplicated: differing,
  });
});
