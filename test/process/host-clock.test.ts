import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createMockApi, type MockApi } from '../../src/mock-api/server.js';
import { API_KEY, CARD_TOKEN_KEYS, makeCard, ok } from '../support/fixtures.js';
import { useTestDatabase } from '../support/helpers.js';

// Which of two answers is newer is decided by Postgres's clock, never by a host's: a host whose
// clock runs 10 minutes fast or slow syncs like any other, and takes no one else's syncs with it.

const BIN = fileURLToPath(new URL('../../bin/cards-sync.js', import.meta.url));
const SHIFT = fileURLToPath(new URL('../support/clock/shifted-clock.mjs', import.meta.url));
const TEN_MINUTES = 10 * 60_000;

const database = useTestDatabase();
let mock: MockApi;
let env: Record<string, string>;
/** What the API answers for each subscriber now. */
const wallets = new Map<number, ReturnType<typeof makeCard>[]>();

beforeAll(async () => {
  mock = createMockApi({
    apiKey: API_KEY,
    override: (lookup) => (lookup.kind === 'id' ? ok(wallets.get(lookup.subscriberId) ?? []) : undefined),
  });
  await mock.start(0);
  env = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? tmpdir(),
    DATABASE_URL: database.url,
    CARDS_API_BASE_URL: mock.url,
    CARDS_API_KEY: API_KEY,
    CARD_TOKEN_KEYS,
  };
});
afterAll(async () => {
  await mock?.stop();
});

/** `cards-sync sync --id N` in a process whose wall clock is `shiftMs` off the host's. */
function syncFrom(shiftMs: number, subscriberId: number): Promise<{ code: number | null; out: string }> {
  const shifted =
    shiftMs === 0
      ? env
      : { ...env, NODE_OPTIONS: `--import=${SHIFT}`, CARDS_SYNC_TEST_CLOCK_SHIFT_MS: String(shiftMs) };
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, 'sync', '--id', String(subscriberId)], {
      env: shifted,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => {
      out += s;
    });
    child.stderr.setEncoding('utf8').on('data', (s: string) => {
      out += s;
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, out }));
  });
}

async function storedFamilies(subscriberId: number): Promise<string[]> {
  const r = await database.handle.pool.query<{ card_family: string }>(
    'select card_family from saved_cards where subscriber_id = $1 and removed_at is null order by id',
    [subscriberId],
  );
  return r.rows.map((row) => row.card_family);
}

async function runs(subscriberId: number) {
  const r = await database.handle.pool.query<{ status: string; started_at: Date }>(
    'select status, started_at from sync_runs where subscriber_id = $1 order by id',
    [subscriberId],
  );
  return r.rows;
}

it.each([
  ['10 minutes fast', TEN_MINUTES],
  ['10 minutes slow', -TEN_MINUTES],
])('a host %s syncs as every other host does, and supersedes no one', async (_label, shift) => {
  const subscriberId = shift > 0 ? 9101 : 9102;
  const card = makeCard(subscriberId, { cardFamily: 'first' });
  wallets.set(subscriberId, [card]);

  // The host with the wrong clock first, then a host with the right one, then the wrong one again:
  // each sync starts after the one before ended, so each one's answer is the newest and is written.
  const first = await syncFrom(shift, subscriberId);
  expect(first.code, first.out).toBe(0);
  expect(first.out).toMatch(/^succeeded /m);

  wallets.set(subscriberId, [{ ...card, cardFamily: 'second' }]);
  const second = await syncFrom(0, subscriberId);
  expect(second.code, second.out).toBe(0);
  expect(second.out).toMatch(/^succeeded /m);
  expect(await storedFamilies(subscriberId)).toEqual(['second']);

  wallets.set(subscriberId, [{ ...card, cardFamily: 'third' }]);
  const third = await syncFrom(shift, subscriberId);
  expect(third.code, third.out).toBe(0);
  expect(third.out).toMatch(/^succeeded /m);
  expect(await storedFamilies(subscriberId)).toEqual(['third']);

  // The ledger's times are Postgres's: in the order the syncs ran, and none 10 minutes off.
  const ledger = await runs(subscriberId);
  expect(ledger.map((r) => r.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
  const times = ledger.map((r) => r.started_at.getTime());
  expect([...times].sort((a, b) => a - b)).toEqual(times);
  const dbNow = (await database.handle.pool.query<{ now: Date }>('select now()')).rows[0]!.now.getTime();
  for (const t of times) expect(Math.abs(dbNow - t)).toBeLessThan(TEN_MINUTES / 2);
});

it('a superseded sync says why, not "undefined"', async () => {
  // An answer newer than this sync's fetch was applied meanwhile (here: a row as a fast host of an
  // earlier release left it, 10 minutes ahead).
  const subscriberId = 9103;
  wallets.set(subscriberId, [makeCard(subscriberId)]);
  await database.handle.pool.query(
    `insert into sync_runs (subscriber_id, trigger, started_at, finished_at, status)
     values ($1, 'cli', now() + interval '10 minutes', now() + interval '10 minutes', 'succeeded')`,
    [subscriberId],
  );
  const run = await syncFrom(0, subscriberId);
  expect(run.code, run.out).toBe(0);
  expect(run.out).toMatch(
    /^superseded {2}subscriber 9103: a newer answer was applied while this one was in flight/m,
  );
  expect(run.out).not.toContain('undefined');
});
