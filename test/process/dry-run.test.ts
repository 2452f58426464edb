import { sql } from 'drizzle-orm';
import { describe, expect, inject, it } from 'vitest';
import { API_KEY, CARD_TOKEN_KEYS, makeCard, ok, useScriptedApi } from '../support/fixtures.js';
import { useTestDatabase } from '../support/helpers.js';
import { runCli } from '../support/queue-helpers.js';

// `cards-sync sync --dry-run` as a user runs it: fetch, validate, print the diff, write nothing.

const database = useTestDatabase();
const upstream = useScriptedApi();
const env = () => ({
  DATABASE_URL: database.url,
  REDIS_URL: inject('redisUrl'),
  CARDS_API_BASE_URL: upstream.url,
  CARDS_API_KEY: API_KEY,
  CARD_TOKEN_KEYS,
});
const counts = async () =>
  (
    await database.handle.db.execute<{ cards: number; runs: number; changes: number }>(sql`
      select (select count(*) from saved_cards)::int as cards, (select count(*) from sync_runs)::int as runs,
             (select count(*) from saved_card_changes)::int as changes`)
  ).rows[0]!;

describe('sync --dry-run', () => {
  it('prints what a sync would insert, update and remove, and writes nothing', async () => {
    const a = makeCard(61, { cardBankName: 'AKBA' });
    const b = makeCard(61);
    const gone = makeCard(61);
    upstream.script.set('id:61', ok([a, b, gone]));
    expect((await runCli(['sync', '--id', '61'], env())).code).toBe(0);
    const before = await counts();

    const added = makeCard(61, { binNumber: '5400-xxxx-xxxx-0582' });
    upstream.script.set(
      'id:61',
      ok([{ ...a, cardBankName: 'YAPIKREDI', cardToken: `${a.cardToken}x` }, b, added]),
    );
    const run = await runCli(['sync', '--id', '61', '--dry-run'], env());
    expect(run.code, run.stderr).toBe(0);
    const lines = run.stdout.trim().split('\n');
    expect(lines[0]).toBe(
      'dry run: subscriber 61: 3 cards upstream; would insert 1, update 1, restore 0, remove 1, leave 1 unchanged (nothing written)',
    );
    expect(run.stdout).toContain(`+ card ${added.id} 5400-xxxx-xxxx-0582`);
    expect(run.stdout).toContain(`~ card ${a.id}`);
    expect(run.stdout).toContain('card_bank_name "AKBA" → "YAPIKREDI"');
    expect(run.stdout).toContain('card_token changed');
    expect(run.stdout).toContain(`- card ${gone.id}`);
    // No token value, old or new, is ever printed.
    expect(run.stdout + run.stderr).not.toContain(a.cardToken);
    expect(await counts()).toEqual(before);

    const json = await runCli(['sync', '--id', '61', '--dry-run', '--json'], env());
    expect(JSON.parse(json.stdout)).toMatchObject({
      subscriberId: 61,
      inserts: [added.id],
      removed: [gone.id],
      written: false,
    });
    expect(await counts()).toEqual(before);
  });

  it('an answer the API refuses or that breaks the rules: says so, exit 1, nothing written', async () => {
    const before = await counts();
    upstream.script.set('id:62', { status: 404, body: { title: 'Not Found' } });
    const notFound = await runCli(['sync', '--id', '62', '--dry-run'], env());
    expect(notFound.code).toBe(1);
    expect(notFound.stdout).toMatch(/^dry run: the API answered 404, not_found; nothing would be written/);
    upstream.script.set('id:63', ok([{ ...makeCard(63), binNumber: '4761730000000043' }]));
    const invalid = await runCli(['sync', '--id', '63', '--dry-run'], env());
    expect(invalid.code).toBe(1);
    expect(invalid.stdout).toContain('invalid_response');
    expect(invalid.stdout).not.toContain('4761730000000043');
    expect(await counts()).toEqual(before);
  });

  it('a card another subscriber holds shows as a conflict that would stay with it', async () => {
    const shared = makeCard(64);
    upstream.script.set('id:64', ok([shared]));
    expect((await runCli(['sync', '--id', '64'], env())).code).toBe(0);
    upstream.script.set('id:65', ok([{ ...shared, subscriberId: 65 }, makeCard(65)]));
    const before = await counts();
    const run = await runCli(['sync', '--id', '65', '--dry-run'], env());
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout.split('\n')[0]).toBe(
      'dry run: subscriber 65: 2 cards upstream; would insert 1, update 0, restore 0, remove 0, leave 0 unchanged, leave 1 in conflict (nothing written)',
    );
    expect(run.stdout).toContain(
      `! card ${shared.id} 4761-xxxx-xxxx-0043 AKBA (Bonus): subscriber 64 holds it`,
    );
    const json = await runCli(['sync', '--id', '65', '--dry-run', '--json'], env());
    expect(JSON.parse(json.stdout)).toMatchObject({ conflicts: [{ id: shared.id, heldBy: 64 }] });
    expect(await counts()).toEqual(before);
  });
});
