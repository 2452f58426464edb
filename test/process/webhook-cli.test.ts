import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type DeliveryLoop, startDeliveryLoop } from '../../jobs/webhooks/delivery-loop.js';
import { createMetrics } from '../../src/metrics/index.js';
import { parseKeyRing } from '../../src/tokens/index.js';
import { createWebhookSender } from '../../src/webhooks/index.js';
import { databaseGauges } from '../support/admin-helpers.js';
import { CARD_TOKEN_KEYS } from '../support/fixtures.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';
import { archiveLog } from '../support/log-archive.js';
import { CLI, waitFor } from '../support/queue-helpers.js';
import { emit } from '../support/webhook-events.js';
import { startReceiver } from '../support/webhook-receiver.js';

// `cards-sync webhooks …` as an operator runs it.

const database = useTestDatabase();
const { logger } = captureLogger();
let receiver: Awaited<ReturnType<typeof startReceiver>>;

/** Runs the built CLI; stdout may hold a secret (printed once, on purpose), stderr never. */
async function cli(args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, [CLI, ...args], {
    env: {
      PATH: process.env.PATH ?? '',
      DATABASE_URL: database.url,
      CARD_TOKEN_KEYS,
      WEBHOOK_ALLOW_PRIVATE: 'true',
      ...env,
    },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => {
    stdout += d;
  });
  child.stderr.on('data', (d) => {
    stderr += d;
  });
  const [code] = await once(child, 'exit');
  archiveLog(`cards-sync ${args.join(' ')} (stderr)`, stderr);
  return { code: code as number | null, stdout, stderr };
}

beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver.close();
});

describe('cards-sync webhooks', () => {
  it('refuses every bad argument with exit 2 and a line that says what is right', async () => {
    const cases: [string[], RegExp, Record<string, string>?][] = [
      [['webhooks', 'add', 'ftp://x.example/'], /must be http\(s\)/],
      [['webhooks', 'add', 'not a url'], /not a URL/],
      [['webhooks', 'add', 'https://user:pw@x.example/'], /must not hold a user or password/],
      [
        ['webhooks', 'add', 'https://x.example/', '--types', 'card.added,card.eaten'],
        /"card\.eaten" is none of them/,
      ],
      [
        ['webhooks', 'add', 'https://x.example/', '--description', 'a\r\nwebhook-id: forged'],
        /one line without control/,
      ],
      [['webhooks', 'disable', 'abc'], /an endpoint id is a whole number/],
      [['webhooks', 'enable', '999999'], /no webhook endpoint 999999/],
      [['webhooks', 'replay', '1', '--since', 'yesterday'], /--since takes a change-feed cursor/],
      [['webhooks', 'replay', '1'], /required option '--since/],
      [
        ['webhooks', 'add', `${receiver.url}/x`],
        /loopback, private, link-local or reserved: refused \(set WEBHOOK_ALLOW_PRIVATE=true/,
        { WEBHOOK_ALLOW_PRIVATE: 'false' },
      ],
      [
        ['webhooks', 'add', 'https://x.example/'],
        /CARD_TOKEN_KEYS is not set: webhook signing secrets are sealed/,
        { CARD_TOKEN_KEYS: '' },
      ],
    ];
    for (const [args, message, env] of cases) {
      const r = await cli(args, env);
      expect({ args, code: r.code }).toEqual({ args, code: 2 });
      expect(r.stderr).toMatch(message);
    }
    const { rows } = await database.handle.pool.query('select count(*)::int as n from webhook_endpoints');
    expect(rows[0].n).toBe(0);
  });

  it('add prints the id and the secret once; list, disable, enable, rotate-secret, deliveries and replay do what they say', async () => {
    const added = await cli([
      'webhooks',
      'add',
      `${receiver.url}/hook?token=abc`,
      '--types',
      'card.added,card.removed',
      '--description',
      'fraud scoring',
    ]);
    expect(added.code).toBe(0);
    const id = Number(/webhook endpoint (\d+) added/.exec(added.stdout)?.[1]);
    const secret = /(whsec_[A-Za-z0-9+/=]+)/.exec(added.stdout)?.[1];
    expect(secret).toBeDefined();
    expect(added.stdout).not.toContain('token=abc');
    // Sealed at rest, and in no audit row.
    const stored = await database.handle.pool.query('select secret from webhook_endpoints where id = $1', [
      id,
    ]);
    expect(stored.rows[0].secret).toMatch(/^ct1:test1:/);
    const audit = await database.handle.pool.query(
      "select detail::text from admin_actions where action like 'webhooks_%'",
    );
    expect(JSON.stringify(audit.rows)).not.toContain(secret!.slice(6, 20));

    const listed = await cli(['webhooks', 'list', '--json']);
    expect(JSON.parse(listed.stdout)).toMatchObject([
      {
        id,
        url: `${receiver.url}/hook?…`,
        types: ['card.added', 'card.removed'],
        enabled: true,
        deadLetters: 0,
        description: 'fraud scoring',
      },
    ]);
    expect(listed.stdout).not.toContain('whsec_');

    // Deliveries, sent by a delivery loop beside the commands.
    const ring = parseKeyRing(CARD_TOKEN_KEYS);
    const sender = createWebhookSender({ timeoutMs: 2000, allowPrivate: true });
    const loop: DeliveryLoop = startDeliveryLoop({
      pool: database.handle.pool,
      ring,
      sender,
      logger,
      workerId: 'cli-test',
      leaseMs: 10_000,
      pollMs: 50,
    });
    try {
      const [first] = await emit(database.handle.pool, 7, 1);
      await waitFor('the first delivery', async () => receiver.received.length >= 1);
      expect(
        new Webhook(secret!).verify(
          receiver.received[0]!.body,
          receiver.received[0]!.headers as Record<string, string>,
        ),
      ).toMatchObject({ id: first });

      const rotated = await cli(['webhooks', 'rotate-secret', String(id)]);
      expect(rotated.code).toBe(0);
      const fresh = /(whsec_[A-Za-z0-9+/=]+)/.exec(rotated.stdout)?.[1];
      expect(fresh).not.toBe(secret);

      expect((await cli(['webhooks', 'disable', String(id)])).code).toBe(0);
      const [whileOff] = await emit(database.handle.pool, 7, 1);
      await new Promise((r) => setTimeout(r, 300));
      expect(receiver.received).toHaveLength(1);
      expect((await cli(['webhooks', 'enable', String(id)])).code).toBe(0);
      await waitFor('the delivery that waited', async () => receiver.received.length >= 2);
      const second = receiver.received[1]!;
      expect(JSON.parse(second.body).id).toBe(whileOff);
      for (const s of [secret!, fresh!])
        expect(new Webhook(s).verify(second.body, second.headers as Record<string, string>)).toBeTruthy();

      const deliveries = await cli(['webhooks', 'deliveries', String(id), '--json']);
      const shown = JSON.parse(deliveries.stdout);
      expect(shown.map((d: { eventId: string }) => d.eventId)).toEqual([whileOff, first]);
      expect(shown[0]).toMatchObject({ status: 'delivered', attempts: 1, last: { statusCode: 200 } });
      expect(
        JSON.parse((await cli(['webhooks', 'deliveries', String(id), '--failed', '--json'])).stdout),
      ).toEqual([]);

      const replay = await cli([
        'webhooks',
        'replay',
        String(id),
        '--since',
        new Date(Date.now() - 3_600_000).toISOString(),
      ]);
      expect(replay.code).toBe(0);
      expect(replay.stdout).toMatch(/2 events queued again/);
      // What it says of the ids is what is sent: the events' own, as on their first delivery.
      expect(replay.stdout).toContain(`(${first} … ${whileOff})`);
      expect(replay.stdout).toContain("the event's own id as its webhook-id, the same as before");
      expect(replay.stdout).not.toMatch(/its own webhook-id|tell a repeat/);
      await waitFor('the replayed deliveries', async () => receiver.received.length >= 4);
      expect(receiver.received.slice(2).map((r) => r.headers['webhook-id'])).toEqual([first, whileOff]);
      expect(receiver.received.slice(2).map((r) => JSON.parse(r.body).id)).toEqual([first, whileOff]);
    } finally {
      await loop.stop(2000);
      await sender.close();
    }
  });

  it('status --json has the webhooks block docs/webhooks.md describes, and /metrics the lag and dead letters per endpoint', async () => {
    const pool = database.handle.pool;
    const dead = await pool.query('select id from webhook_endpoints order by id limit 1');
    const endpointId = Number(dead.rows[0].id);
    await pool.query(
      `insert into webhook_deliveries (endpoint_id, event_id, subscriber_id, type, event_at, body, status, finished_at)
       values ($1, 'evt_dead', 1, 'card.added', now() - interval '2 hours', '{}', 'dead', now()),
              ($1, 'evt_waiting', 2, 'card.added', now() - interval '90 seconds', '{}', 'pending', null)`,
      [endpointId],
    );
    const status = await cli(['status', '--json'], { REDIS_URL: inject('redisUrl') });
    const block = JSON.parse(status.stdout).webhooks;
    expect(block).toEqual([
      {
        id: endpointId,
        url: `${receiver.url}/hook`,
        enabled: true,
        lagSeconds: expect.any(Number),
        pending: 1,
        pendingCapped: false,
        nearRetention: false,
        failing: false,
        deadLetters: 1,
        disabledReason: null,
      },
    ]);
    expect(block[0].lagSeconds).toBeGreaterThanOrEqual(89);
    expect(status.stdout).not.toContain('token=abc');
    const text = await cli(['status'], { REDIS_URL: inject('redisUrl') });
    expect(text.stdout).toMatch(
      new RegExp(`${endpointId} ${receiver.url}/hook: ok, pending 1, lag \\d+s, dead letters 1`),
    );

    const exposed = await databaseGauges(database.handle.db);
    expect(exposed).toContain(`cards_sync_webhook_dead_letters{endpoint="${endpointId}"} 1`);
    expect(exposed).toMatch(
      new RegExp(`cards_sync_webhook_lag_seconds\\{endpoint="${endpointId}"\\} (89|9\\d)`),
    );
  });

  it('a disabled endpoint is not up to date: list, status and /metrics count what waits for it, loud near the retention', async () => {
    const pool = database.handle.pool;
    // Nothing delivers here: every endpoint keeps what waits for it.
    await pool.query('update webhook_endpoints set enabled = false');
    const added = await cli(['webhooks', 'add', `${receiver.url}/off`]);
    const id = Number(/webhook endpoint (\d+) added/.exec(added.stdout)?.[1]);
    const filtered = await cli([
      'webhooks',
      'add',
      `${receiver.url}/removed-only`,
      '--types',
      'card.removed',
    ]);
    const removedOnly = Number(/webhook endpoint (\d+) added/.exec(filtered.stdout)?.[1]);
    expect((await cli(['webhooks', 'disable', String(id)])).code).toBe(0);
    expect((await cli(['webhooks', 'disable', String(removedOnly)])).code).toBe(0);
    const waiting = await emit(pool, 31, 3);
    // The first of them written 20 hours ago: past 80% of a one-day retention (19.2 h).
    await pool.query(
      "update change_events set created_at = created_at - interval '20 hours' where 'evt_' || id::text = $1",
      [waiting[0]],
    );
    const env = { CHANGE_EVENTS_RETENTION_DAYS: '1', REDIS_URL: inject('redisUrl') };

    const listed = JSON.parse((await cli(['webhooks', 'list', '--json'], env)).stdout) as {
      id: number;
      pending: number;
      pendingCapped: boolean;
      lagSeconds: number;
      nearRetention: boolean;
    }[];
    const entry = listed.find((e) => e.id === id)!;
    expect(entry).toMatchObject({ enabled: false, pending: 3, pendingCapped: false, nearRetention: true });
    expect(entry.lagSeconds).toBeGreaterThanOrEqual(20 * 3600);
    expect(entry.lagSeconds).toBeLessThan(21 * 3600);
    // It takes only card.removed: the card.added events do not wait for it.
    expect(listed.find((e) => e.id === removedOnly)).toMatchObject({
      pending: 0,
      lagSeconds: 0,
      nearRetention: false,
    });
    const text = await cli(['webhooks', 'list'], env);
    expect(text.stdout).toMatch(
      new RegExp(`${id} .* disabled: disabled by an operator  pending 3  lag \\d+s`),
    );
    expect(text.stdout).toContain(
      `EVENTS NEAR RETENTION: its oldest waiting event is 0.8 days old, and events older than 1 days (CHANGE_EVENTS_RETENTION_DAYS) are dropped unseen; enable it before then (cards-sync webhooks enable ${id}), or remove it if nobody wants them (cards-sync webhooks remove ${id})`,
    );

    const status = JSON.parse((await cli(['status', '--json'], env)).stdout).webhooks;
    expect(status.find((e: { id: number }) => e.id === id)).toMatchObject({
      enabled: false,
      pending: 3,
      nearRetention: true,
      lagSeconds: expect.toSatisfy((n: number) => n >= 20 * 3600 && n < 21 * 3600),
    });
    expect((await cli(['status'], env)).stdout).toMatch(
      new RegExp(
        `${id} ${receiver.url}/off: disabled, pending 3, lag \\d+s, dead letters 0\n    EVENTS NEAR RETENTION`,
      ),
    );

    const exposed = await databaseGauges(database.handle.db);
    const lag = Number(
      new RegExp(`cards_sync_webhook_lag_seconds\\{endpoint="${id}"\\} (\\d+)`).exec(exposed)?.[1],
    );
    expect(lag).toBeGreaterThanOrEqual(20 * 3600);
    expect(exposed).toContain('cards_sync_change_events_retention_seconds 2592000');

    // A card.removed event waits for the filtered one.
    await emit(pool, 31, 1, 'card.removed');
    expect(
      JSON.parse((await cli(['webhooks', 'list', '--json'], env)).stdout).find(
        (e: { id: number }) => e.id === removedOnly,
      ),
    ).toMatchObject({ pending: 1, nearRetention: false });
  });

  it('counts at most 10,000 waiting events of each kind, and says more may wait', async () => {
    const pool = database.handle.pool;
    await pool.query(
      `insert into change_events (subscriber_id, created_at, aggregatetype, aggregateid, type, payload)
       select 32, now(), 'subscriber', '32', 'card.added', '{}'::jsonb from generate_series(1, 10001)`,
    );
    const listed = JSON.parse((await cli(['webhooks', 'list', '--json'])).stdout) as {
      types: string[] | null;
      pending: number;
      pendingCapped: boolean;
    }[];
    const all = listed.find((e) => e.types === null && e.pending >= 10_000)!;
    expect(all).toMatchObject({ pending: 10_000, pendingCapped: true });
    expect((await cli(['webhooks', 'list'])).stdout).toContain('pending 10000+');
  });

  it('retry sends now what waits out its backoff: due at once, audited; an unknown or disabled endpoint exits 2', async () => {
    const pool = database.handle.pool;
    const added = await cli(['webhooks', 'add', `${receiver.url}/back`]);
    const id = Number(/webhook endpoint (\d+) added/.exec(added.stdout)?.[1]);
    await pool.query(
      `insert into webhook_deliveries (endpoint_id, event_id, subscriber_id, type, event_at, body, status, attempts, next_attempt_at)
       values ($1, 'evt_backoff_1', 51, 'card.added', now(), '{}', 'pending', 3, now() + interval '95 seconds'),
              ($1, 'evt_backoff_2', 52, 'card.added', now(), '{}', 'pending', 2, now() + interval '40 seconds')`,
      [id],
    );
    const run = await cli(['webhooks', 'retry', String(id)]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout.trim()).toBe(
      `webhook endpoint ${id}: 2 deliveries waiting out a backoff are due now; the workers send them at their next claim`,
    );
    const { rows } = await pool.query<{ waiting: number }>(
      `select count(*)::int as waiting from webhook_deliveries where endpoint_id = $1 and next_attempt_at > now()`,
      [id],
    );
    expect(rows[0]!.waiting).toBe(0);
    const audit = await pool.query(
      "select detail from admin_actions where action = 'webhooks_retry' and (detail->>'endpoint')::int = $1",
      [id],
    );
    expect(audit.rows.map((r) => r.detail)).toEqual([{ endpoint: id, retried: 2 }]);
    const unknown = await cli(['webhooks', 'retry', '999998']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('no webhook endpoint 999998');
    await cli(['webhooks', 'disable', String(id)]);
    const disabled = await cli(['webhooks', 'retry', String(id)]);
    expect(disabled.code).toBe(2);
    expect(disabled.stderr).toContain(`\`cards-sync webhooks enable ${id}\` sends what waited`);
    await cli(['webhooks', 'remove', String(id)]);
  });

  it('remove takes an endpoint away: says what waited, audits it without a secret, keeps its deliveries readable; an unknown id exits 2', async () => {
    const pool = database.handle.pool;
    const added = await cli(['webhooks', 'add', `${receiver.url}/going?token=abc`]);
    const id = Number(/webhook endpoint (\d+) added/.exec(added.stdout)?.[1]);
    const secret = /(whsec_[A-Za-z0-9+/=]+)/.exec(added.stdout)![1]!;
    await pool.query(
      `insert into webhook_deliveries (endpoint_id, event_id, subscriber_id, type, event_at, body, status, attempts, finished_at)
       values ($1, 'evt_sent_before', 41, 'card.added', now(), '{}', 'delivered', 1, now())`,
      [id],
    );
    // No worker runs: these wait for it, not taken from the feed yet.
    await emit(pool, 41, 2);

    // A worker that delivered to it counts its attempts (the counter is the process's own).
    const metrics = createMetrics({ defaultMetrics: false });
    metrics.webhookDeliveries.inc({ endpoint: String(id), outcome: 'delivered' });
    metrics.webhookDeliveries.inc({ endpoint: String(id), outcome: 'failed' });
    expect(await databaseGauges(database.handle.db, metrics)).toContain(
      `cards_sync_webhook_deliveries_total{endpoint="${id}",outcome="delivered"} 1`,
    );

    const removed = await cli(['webhooks', 'remove', String(id)]);
    expect(removed.code).toBe(0);
    // Removed, it leaves /metrics at the next scrape (docs/webhooks.md, "Removed").
    const scraped = await databaseGauges(database.handle.db, metrics);
    expect(scraped).not.toContain(`endpoint="${id}"`);
    expect(removed.stdout).toMatch(
      new RegExp(
        `^webhook endpoint ${id} removed: ${receiver.url}/going\\?…; 2 events \\(the oldest \\d+ s old\\) still waited for it and will not be sent\n`,
      ),
    );
    expect(removed.stdout).toContain(
      `its past deliveries stay readable (cards-sync webhooks deliveries ${id}) for 30 days (CHANGE_EVENTS_RETENTION_DAYS)`,
    );
    expect(removed.stdout + removed.stderr).not.toContain('token=abc');
    const audit = await pool.query(
      "select detail from admin_actions where action = 'webhooks_remove' and (detail->>'endpoint')::int = $1",
      [id],
    );
    expect(audit.rows).toHaveLength(1);
    expect(audit.rows[0].detail).toEqual({
      endpoint: id,
      url: `${receiver.url}/going`,
      pending: 2,
      pendingCapped: false,
      lagSeconds: expect.any(Number),
    });
    expect(JSON.stringify(audit.rows)).not.toContain(secret.slice(6, 20));

    const listed = JSON.parse((await cli(['webhooks', 'list', '--json'])).stdout) as { id: number }[];
    expect(listed.map((e) => e.id)).not.toContain(id);
    const status = JSON.parse((await cli(['status', '--json'], { REDIS_URL: inject('redisUrl') })).stdout);
    expect(status.webhooks.map((e: { id: number }) => e.id)).not.toContain(id);
    // Its past deliveries stay readable.
    const deliveries = await cli(['webhooks', 'deliveries', String(id), '--json']);
    expect(deliveries.code).toBe(0);
    expect(JSON.parse(deliveries.stdout).map((d: { eventId: string }) => d.eventId)).toEqual([
      'evt_sent_before',
    ]);
    const text = await cli(['webhooks', 'deliveries', String(id)]);
    expect(text.stdout).toMatch(new RegExp(`^endpoint ${id} was removed at .*; what it was sent:\n`));

    for (const [args, message] of [
      [['webhooks', 'remove', String(id)], new RegExp(`webhook endpoint ${id} was removed already, at `)],
      [['webhooks', 'remove', '999999'], /no webhook endpoint 999999; `cards-sync webhooks list` shows them/],
      [['webhooks', 'remove', 'abc'], /an endpoint id is a whole number/],
      [['webhooks', 'enable', String(id)], new RegExp(`no webhook endpoint ${id}`)],
      [['webhooks', 'rotate-secret', String(id)], new RegExp(`no webhook endpoint ${id}`)],
      [['webhooks', 'replay', String(id), '--since', '0-0'], new RegExp(`no webhook endpoint ${id}`)],
    ] as const) {
      const r = await cli([...args]);
      expect({ args, code: r.code }).toEqual({ args, code: 2 });
      expect(r.stderr).toMatch(message);
    }
    const help = await cli(['webhooks', '--help']);
    expect(help.stdout).toMatch(/remove <id>\s+take an endpoint away/);
  });
});
