import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createChangeSignal } from '../../db/events/index.js';
import { type ApiClient, createApiClient } from '../../src/api/index.js';
import { FEED_START, pollFeed, readFeed } from '../../src/events/index.js';
import { syncSubscriber } from '../../src/sync/index.js';
import { READ_TOKEN, useAdminApp } from '../support/admin-client.js';
import { API_KEY, makeCard, ok, testTokens, useScriptedApi } from '../support/fixtures.js';
import { captureLogger, useTestDatabase } from '../support/helpers.js';
import { runCli, startCli, waitFor } from '../support/queue-helpers.js';

// the pull feed never skips an event whose transaction committed late, and a
// long poll is woken by the commit (docs/events.md).

const database = useTestDatabase();
const upstream = useScriptedApi();
const admin = useAdminApp(database);
let api: ApiClient;
const { logger } = captureLogger();

beforeAll(() => {
  api = createApiClient({ baseUrl: upstream.url, apiKey: API_KEY, pathStyle: 'standard', timeoutMs: 2000 });
});
afterAll(async () => {
  await api.close();
});

const pool = () => database.handle.db.$client;
const sync = (subscriberId: number) =>
  syncSubscriber(
    { db: database.handle.db, api, logger, tokens: testTokens, changeEvents: true },
    { target: { subscriberId }, trigger: 'manual' },
  );

/** The cursor after every event there is now. */
async function end(): Promise<string> {
  let after = FEED_START;
  for (;;) {
    const page = await readFeed(pool(), { after, limit: 1000 });
    if (page.events.length === 0) return after;
    after = page.next;
  }
}

const insertEvent = (
  client: { query: (q: string, v: unknown[]) => Promise<unknown> },
  subscriberId: number,
) =>
  client.query(
    `insert into change_events (subscriber_id, created_at, aggregatetype, aggregateid, type, payload)
     values ($1::bigint, now(), 'subscriber', $1::bigint::text, 'card.added', jsonb_build_object('subscriberId', $1::bigint))`,
    [subscriberId],
  );

describe('the pull feed', () => {
  it('a reader following next gets an event whose transaction took its sequence first and committed last', async () => {
    const start = await end();
    const early = await pool().connect();
    const late = await pool().connect();
    try {
      // The first transaction takes its sequence number (and transaction id) and stays open...
      await early.query('begin');
      await insertEvent(early, 4801);
      // ...while a second one, with a later number, commits.
      await late.query('begin');
      await insertEvent(late, 4802);
      await late.query('commit');
      const { rows } = await pool().query<{ subscriber_id: string; seq: string }>(
        'select subscriber_id, seq from change_events where subscriber_id in (4801, 4802)',
      );
      // Committed: 4802 only, with the larger sequence number.
      expect(rows.map((r) => Number(r.subscriber_id))).toEqual([4802]);

      // A reader now must not move past the open transaction's event.
      const first = await readFeed(pool(), { after: start, limit: 100 });
      const seen = first.events.map((e) => e.data.subscriberId);
      await early.query('commit');
      const second = await readFeed(pool(), { after: first.next, limit: 100 });
      seen.push(...second.events.map((e) => e.data.subscriberId));
      expect(seen).toEqual([4801, 4802]);
      // Each exactly once: nothing left behind the last cursor.
      expect((await readFeed(pool(), { after: second.next, limit: 100 })).events).toEqual([]);
    } finally {
      early.release();
      late.release();
    }
  });

  it('a long poll is woken by the commit of a new event', async () => {
    const after = await end();
    const signal = createChangeSignal(pool());
    try {
      expect(signal.received).toBe(0);
      const polled = pollFeed(pool(), signal, { after, limit: 100, waitMs: 30_000 });
      // Not answered yet: nothing new.
      const pending = await Promise.race([
        polled.then(() => 'answered'),
        new Promise((r) => setTimeout(() => r('waiting'), 200)),
      ]);
      expect(pending).toBe('waiting');
      upstream.script.set('id:4803', ok([makeCard(4803)]));
      await sync(4803);
      const page = await polled;
      expect(page.events.map((e) => [e.type, e.data.subscriberId])).toEqual([['card.added', 4803]]);
      // It answered because the outbox's notification came, not because its wait ran out.
      expect(signal.received).toBeGreaterThanOrEqual(1);
    } finally {
      await signal.close();
    }
  });

  it('a long poll whose LISTEN connection breaks gives it back: the next wait listens again, the pool still ends', async () => {
    const own = new pg.Pool({
      connectionString: database.url,
      max: 2,
      application_name: 'signal break test',
    });
    const signal = createChangeSignal(own);
    const first = await signal.arm(30_000);
    expect(own.totalCount).toBe(1);
    // A Postgres restart, as the listening connection sees it.
    await pool().query(
      "select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'signal break test'",
    );
    await waitFor('the broken listener to leave the pool', async () => own.totalCount === 0, 10_000);
    first.cancel();
    const second = await signal.arm(50);
    expect(own.totalCount).toBe(1);
    expect(await second.woken).toBe(false);
    await signal.close();
    const ended = await Promise.race([
      own.end().then(() => 'ended'),
      new Promise((r) => setTimeout(() => r('still waiting'), 5000)),
    ]);
    expect(ended).toBe('ended');
  });

  it('GET /api/changes: pages with next, for the read token too; bad parameters are refused', async () => {
    upstream.script.set('id:4804', ok([makeCard(4804), makeCard(4804)]));
    const after = await end();
    await sync(4804);
    const res = await admin.get(`/api/changes?after=${after}&limit=1`, { token: READ_TOKEN });
    expect(res.status).toBe(200);
    const page = (await res.json()) as { events: { data: { subscriberId: number } }[]; next: string };
    expect(page.events.map((e) => e.data.subscriberId)).toEqual([4804]);
    const rest = (await (await admin.get(`/api/changes?after=${page.next}`)).json()) as typeof page;
    expect(rest.events.map((e) => e.data.subscriberId)).toEqual([4804]);
    expect((await admin.get('/api/changes', { token: null })).status).toBe(401);
    for (const [query, message] of [
      ['after=12', 'not a change feed cursor'],
      ['after=1-2-3', 'not a change feed cursor'],
      ['limit=0', 'limit must be a whole number from 1 to 1000'],
      ['limit=5000', 'limit must be'],
      ['wait=x', 'wait must be a whole number from 0 to 60'],
      ['wait=61', 'wait must be'],
    ] as const) {
      const bad = await admin.get(`/api/changes?${query}`);
      expect(bad.status, query).toBe(400);
      expect(((await bad.json()) as { error: string }).error).toContain(message);
    }
  });

  it('GET /api/changes?wait answers when an event commits', async () => {
    const after = await end();
    const answer = admin.get(`/api/changes?after=${after}&wait=30`);
    await new Promise((r) => setTimeout(r, 200));
    upstream.script.set('id:4805', ok([makeCard(4805)]));
    await sync(4805);
    const page = (await (await answer).json()) as {
      events: { type: string; data: { subscriberId: number } }[];
    };
    expect(page.events.map((e) => [e.type, e.data.subscriberId])).toEqual([['card.added', 4805]]);
  });
});

/** A cursor whose transaction this database will not reach: another database's, say. */
async function futureCursor(): Promise<string> {
  const { rows } = await pool().query<{ xmax: string }>(
    'select pg_snapshot_xmax(pg_current_snapshot())::text as xmax',
  );
  return `${BigInt(rows[0]!.xmax) + 1_000_000_000n}-1`;
}

describe('a cursor beyond the head', () => {
  it('GET /api/changes refuses it with 400 naming the head; a long poll from that head gets the next event', async () => {
    upstream.script.set('id:4811', ok([makeCard(4811)]));
    await sync(4811);
    const head = await end();
    const far = await futureCursor();
    for (const cursor of [far, '99999999999999-1']) {
      const res = await admin.get(`/api/changes?after=${cursor}&wait=5`, { token: READ_TOKEN });
      expect(res.status).toBe(400);
      const body = (await res.json()) as { error: string; head: string };
      expect(body.head).toBe(head);
      expect(body.error).toContain(`cursor ${cursor} is beyond the change feed's head ${head}:`);
      expect(body.error).not.toContain('no event to read now');
    }
    // A reader at the head is caught up, not ahead: its long poll is answered by the next commit.
    const answer = admin.get(`/api/changes?after=${head}&wait=30`, { token: READ_TOKEN });
    await new Promise((r) => setTimeout(r, 200));
    upstream.script.set('id:4812', ok([makeCard(4812)]));
    await sync(4812);
    const res = await answer;
    expect(res.status).toBe(200);
    const page = (await res.json()) as { events: { data: { subscriberId: number } }[] };
    expect(page.events.map((e) => e.data.subscriberId)).toEqual([4812]);
  });

  it('cards-sync changes exits 2 naming the head; --follow from the head prints the next event', async () => {
    const env = { DATABASE_URL: database.url, CHANGE_EVENTS: 'on', LOG_LEVEL: 'silent' };
    const head = await end();
    for (const args of [['changes'], ['changes', '--follow']]) {
      const run = await runCli([...args, '--after', await futureCursor()], env);
      expect(run.code, run.stderr).toBe(2);
      expect(run.stdout).toBe('');
      expect(run.stderr).toMatch(
        new RegExp(`^cards-sync: cursor \\d+-1 is beyond the change feed's head ${head}:`),
      );
      expect(run.stderr).not.toContain('next:');
    }
    const atHead = await runCli(['changes', '--after', head], env);
    expect(atHead.code, atHead.stderr).toBe(0);
    expect(atHead.stderr).toBe(`next: ${head}\n`);
    const child = startCli(['changes', '--follow', '--after', head], env);
    try {
      await new Promise((r) => setTimeout(r, 1000));
      upstream.script.set('id:4813', ok([makeCard(4813)]));
      await sync(4813);
      await waitFor('the event', async () => child.stdout().includes('subscriber 4813'));
    } finally {
      child.process.kill('SIGINT');
    }
    expect((await child.done).code).toBe(0);
  });

  it('with every event dropped, a cursor the feed gave is still good; one beyond is refused, naming the horizon', async () => {
    upstream.script.set('id:4814', ok([makeCard(4814)]));
    await sync(4814);
    const given = await end();
    // What retention does to a quiet feed: no event left.
    await pool().query('delete from change_events');
    const env = { DATABASE_URL: database.url, CHANGE_EVENTS: 'on', LOG_LEVEL: 'silent' };
    const run = await runCli(['changes', '--after', given], env);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toBe(`next: ${given}\n`);
    const res = await admin.get(`/api/changes?after=${given}`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ events: [], next: given });

    const refused = await admin.get(`/api/changes?after=${await futureCursor()}`);
    expect(refused.status).toBe(400);
    const body = (await refused.json()) as { error: string; head: string };
    expect(body.head).toMatch(/^\d+-0$/);
    expect(BigInt(body.head.split('-')[0]!)).toBeGreaterThan(BigInt(given.split('-')[0]!));
    expect(body.error).toContain(`beyond the change feed's head ${body.head} (no event to read now):`);
    // The head named is a cursor to follow from: it misses no new event.
    const answer = admin.get(`/api/changes?after=${body.head}&wait=30`);
    await new Promise((r) => setTimeout(r, 200));
    upstream.script.set('id:4815', ok([makeCard(4815)]));
    await sync(4815);
    const page = (await (await answer).json()) as { events: { data: { subscriberId: number } }[] };
    expect(page.events.map((e) => e.data.subscriberId)).toEqual([4815]);
  });
});

describe('cards-sync changes', () => {
  const env = () => ({ DATABASE_URL: database.url, CHANGE_EVENTS: 'on', LOG_LEVEL: 'silent' });

  it('prints the events after a cursor, one JSON line each, and the next cursor on stderr', async () => {
    const after = await end();
    upstream.script.set('id:4806', ok([makeCard(4806)]));
    await sync(4806);
    const run = await runCli(['changes', '--after', after, '--json'], env());
    expect(run.code).toBe(0);
    const events = run.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(events.map((e) => [e.type, e.data.subscriberId])).toEqual([['card.added', 4806]]);
    expect(run.stderr).toMatch(/^next: \d+-\d+$/m);
  });

  it('--follow prints events as they commit, and stops on SIGINT', async () => {
    const after = await end();
    const child = startCli(['changes', '--follow', '--after', after], env());
    try {
      await new Promise((r) => setTimeout(r, 1000));
      const card = makeCard(4807);
      upstream.script.set('id:4807', ok([card]));
      await sync(4807);
      for (let i = 0; i < 100 && !child.stdout().includes('card.added'); i++) {
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(child.stdout()).toContain(`card.added subscriber 4807 card ${card.id} 4761-xxxx-xxxx-0043`);
    } finally {
      child.process.kill('SIGINT');
    }
    const run = await child.done;
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(/next: \d+-\d+/);
  });

  it('refuses a bad cursor with exit 2', async () => {
    const run = await runCli(['changes', '--after', 'yesterday'], env());
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('not a change feed cursor');
  });
});
