import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { UnsafeBigintError } from '../../db/client.js';
import { savedCards, syncRuns } from '../../db/schema/index.js';
import { useTestDatabase } from '../support/helpers.js';

// What the database itself guarantees, whatever the code above it does.

const database = useTestDatabase();

let nextId = 7_000_000;

async function insertCard(binNumber: string, overrides: { id?: string; subscriberId?: number } = {}) {
  const id = overrides.id ?? String(nextId++);
  await database.handle.pool.query(
    `insert into saved_cards (id, subscriber_id, card_token, bin_number, card_family, card_bank_code,
       card_bank_name, company_id, create_date, first_seen_at, last_seen_at, updated_at)
     values ($1, $2, 'tok', $3, 'Bonus', 100100000, 'AKBA', -1, now(), now(), now(), now())`,
    [id, overrides.subscriberId ?? 900, binNumber],
  );
  return id;
}

async function insertRun(status: string, trigger: string) {
  await database.handle.pool.query(
    `insert into sync_runs (subscriber_id, trigger, status, started_at, finished_at)
     values (900, $1, $2, now(), now())`,
    [trigger, status],
  );
}

/** The Postgres error a promise rejects with (or a failure if it resolves). */
async function pgError(promise: Promise<unknown>): Promise<{ code?: string; constraint?: string }> {
  try {
    await promise;
  } catch (error) {
    return error as { code?: string; constraint?: string };
  }
  throw new Error('expected the database to refuse the row, but it was stored');
}

describe('saved_cards.bin_number holds masked numbers only', () => {
  it.each([
    ['a full 16-digit number', '4761123456780043'],
    ['a full number grouped like a mask', '4761-1234-5678-0043'],
    ['a half-masked number', '4761-xxxx-1234-0043'],
    ['a mask with a digit inside', '4761-xxx1-xxxx-0043'],
    ['a number with spaces', '4761 1234 5678 0043'],
    ['a masked value followed by a full number on the next line', '4761-xxxx-xxxx-0043\n4761123456780043'],
    ['a masked value with trailing digits', '4761-xxxx-xxxx-00431234'],
    ['another mask character', '4761-####-####-0043'],
    ['an empty string', ''],
  ])('refuses %s (CHECK, 23514)', async (_what, bin) => {
    const error = await pgError(insertCard(bin));
    expect(error.code).toBe('23514');
    expect(error.constraint).toBe('saved_cards_bin_number_masked');
  });

  it.each([
    ['4761-xxxx-xxxx-0043'],
    ['5400-XXXX-XXXX-1234'],
    ['4506-****-****-9999'],
    ['4508-xX*x-*Xx*-0001'],
  ])('accepts %s', async (bin) => {
    const id = await insertCard(bin);
    const { rows } = await database.handle.pool.query('select bin_number from saved_cards where id = $1', [
      id,
    ]);
    expect(rows).toEqual([{ bin_number: bin }]);
  });
});

describe('sync_runs.status and trigger take only the documented values', () => {
  it.each([['done'], ['SUCCEEDED'], ['']])('refuses status %j', async (status) => {
    const error = await pgError(insertRun(status, 'cli'));
    expect(error).toMatchObject({ code: '23514', constraint: 'sync_runs_status_valid' });
  });

  it.each([['cron'], ['CLI'], ['']])('refuses trigger %j', async (trigger) => {
    const error = await pgError(insertRun('succeeded', trigger));
    expect(error).toMatchObject({ code: '23514', constraint: 'sync_runs_trigger_valid' });
  });

  it('accepts every status and trigger the ledger documents', async () => {
    for (const status of ['succeeded', 'not_found', 'invalid_response', 'failed']) {
      await insertRun(status, 'cli');
    }
    for (const trigger of ['manual', 'nightly', 'api', 'cli']) {
      await insertRun('succeeded', trigger);
    }
  });

  it('saved_card_changes.change refuses a kind outside added/updated/removed/restored', async () => {
    const insertChange = (change: string) =>
      database.handle.pool.query(
        `insert into saved_card_changes (card_id, subscriber_id, change, changed_at)
         values (1, 900, $1, now())`,
        [change],
      );
    for (const change of ['added', 'updated', 'removed', 'restored']) await insertChange(change);
    expect(await pgError(insertChange('deleted'))).toMatchObject({
      code: '23514',
      constraint: 'saved_card_changes_change_valid',
    });
  });
});

/** The error itself or any error in its `cause` chain that is an {@link UnsafeBigintError}. */
function findUnsafeBigint(error: unknown): UnsafeBigintError | undefined {
  for (let e = error; e instanceof Error; e = e.cause) {
    if (e instanceof UnsafeBigintError) return e;
  }
  return undefined;
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    const value = await promise;
    return new Error(`resolved with ${JSON.stringify(value)}`);
  } catch (error) {
    return error;
  }
}

describe('bigints beyond 2^53−1 are refused on read, never rounded', () => {
  const db = () => database.handle.db;

  it('reads 2^53−1 exactly', async () => {
    await insertCard('4761-xxxx-xxxx-0043', { id: '9007199254740991', subscriberId: 910 });
    const rows = await db()
      .select({ id: savedCards.id })
      .from(savedCards)
      .where(eq(savedCards.subscriberId, 910));
    expect(rows).toEqual([{ id: Number.MAX_SAFE_INTEGER }]);
  });

  it.each([
    ['2^53', '9007199254740992', 911],
    ['2^53 + 1 (would round to 2^53)', '9007199254740993', 912],
    ['the int8 maximum', '9223372036854775807', 913],
    ['−2^53', '-9007199254740992', 914],
  ])('a card id of %s throws UnsafeBigintError', async (_what, id, subscriberId) => {
    await insertCard('4761-xxxx-xxxx-0043', { id, subscriberId });
    const error = await rejection(
      db().select().from(savedCards).where(eq(savedCards.subscriberId, subscriberId)),
    );
    const unsafe = findUnsafeBigint(error);
    expect(unsafe, String(error)).toBeInstanceOf(UnsafeBigintError);
    expect(unsafe?.code).toBe('unsafe_bigint');
  });

  it('an unsafe refresh_run_id in sync_runs throws too, and the pool keeps working', async () => {
    await database.handle.pool.query(
      `insert into sync_runs (subscriber_id, trigger, status, started_at, finished_at, refresh_run_id)
       values (920, 'nightly', 'succeeded', now(), now(), 18014398509481984)`,
    );
    const error = await rejection(db().select().from(syncRuns).where(eq(syncRuns.subscriberId, 920)));
    expect(findUnsafeBigint(error), String(error)).toBeInstanceOf(UnsafeBigintError);
    const [safe] = await db()
      .select({ id: savedCards.id })
      .from(savedCards)
      .where(eq(savedCards.subscriberId, 910));
    expect(safe).toEqual({ id: Number.MAX_SAFE_INTEGER });
  });
});

describe('indexes for the queries analysts and the sync run', () => {
  async function indexDefs(table: string): Promise<string[]> {
    const { rows } = await database.handle.pool.query<{ indexdef: string }>(
      `select indexdef from pg_indexes where schemaname = 'public' and tablename = $1`,
      [table],
    );
    return rows.map((r) => r.indexdef);
  }

  it('saved_cards: by id and by subscriber, and no index that no query uses (each costs every card written)', async () => {
    const defs = await indexDefs('saved_cards');
    const has = (pattern: RegExp) => defs.some((d) => pattern.test(d));
    expect(has(/\(id\)$/), 'primary key on id').toBe(true);
    expect(has(/USING btree \(subscriber_id\)$/), 'subscriber_id').toBe(true);
    // Cards that moved, by whom they were first stored for (0021: only those rows are in it).
    expect(has(/USING btree \(added_subscriber_id\) WHERE \(added_subscriber_id IS NOT NULL\)$/)).toBe(true);
    // Dropped by migration 0020: analysts group by these, which reads the table anyway.
    expect(defs).toHaveLength(3);
  });

  it('subscribers: e-mail unique regardless of case', async () => {
    expect(await indexDefs('subscribers')).toContainEqual(
      expect.stringMatching(
        /^CREATE UNIQUE INDEX .* USING btree \(lower\(email\)\) WHERE \(email IS NOT NULL\)$/,
      ),
    );
    await database.handle.pool.query(
      `insert into subscribers (subscriber_id, email) values (930, 'Ayse@Example.com')`,
    );
    const error = await pgError(
      database.handle.pool.query(
        `insert into subscribers (subscriber_id, email) values (931, 'ayse@example.com')`,
      ),
    );
    expect(error.code).toBe('23505');
  });

  it('sync_runs: by subscriber and start time, and by time and id in block ranges; no primary key', async () => {
    const defs = await indexDefs('sync_runs');
    expect(defs).toContainEqual(
      expect.stringMatching(/ON ONLY public\.sync_runs USING btree \(subscriber_id, started_at\)$/),
    );
    expect(defs).toContainEqual(
      expect.stringMatching(
        /USING brin \(started_at, id\) WITH \(autosummarize='true', pages_per_range='16'\)$/,
      ),
    );
    expect(defs.filter((d) => /UNIQUE/.test(d))).toEqual([]);
  });
});
