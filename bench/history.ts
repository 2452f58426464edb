import pg from 'pg';
import { declareKnownMigration } from '../db/fence.js';
import { databaseFlag, parseFlags, resetDatabase, wholeNumber } from './harness.js';

// What saved_cards_as_of costs as history grows: a synthetic history of H rows (an `added` row per
// card and updates with their previous values), runs for every subscriber, then the whole table
// and single wallets rebuilt at several points in the past.
//   npm run bench:history -- --cards 200000 --updates 4     (≈ 1,000,000 history rows)

const { values } = parseFlags({
  options: {
    cards: { type: 'string', default: '200000' },
    updates: { type: 'string', default: '4' },
    subscribers: { type: 'string', default: '50000' },
    wallets: { type: 'string', default: '200' },
    ...databaseFlag('cards_sync_bench_history'),
  },
});
const cards = wholeNumber('--cards', values.cards, 1);
const updates = wholeNumber('--updates', values.updates, 0);
const subscribers = wholeNumber('--subscribers', values.subscribers, 1);
const wallets = wholeNumber('--wallets', values.wallets, 1);
const databaseUrl = values['database-url']!;

async function timed<T>(what: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t = performance.now();
  const value = await what();
  return { ms: performance.now() - t, value };
}

async function main() {
  await resetDatabase(databaseUrl);
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  await client.query(declareKnownMigration());
  const seed = await timed(async () => {
    // A year of history: cards first seen over 300 days, each updated every 13 days afterwards.
    await client.query(
      // Each card's 'added' row is made from its own row (migration 0021), as a sync stores it.
      `insert into saved_cards (id, subscriber_id, card_token, card_token_fingerprint, bin_number, card_family,
         card_bank_code, card_bank_name, company_id, create_date, first_seen_at, last_seen_at, updated_at,
         added_change_id)
       select g, g % $2 + 1, 'ct1:k:x', 'f', '4761-xxxx-xxxx-0043', 'Bonus', 100, 'BANK' || ($3 + 1),
         1, now() - interval '2 years', now() - interval '365 days' + (g % 300) * interval '1 day', now(), now(),
         nextval('saved_card_changes_id_seq')
       from generate_series(1, $1::bigint) g`,
      [cards, subscribers, updates],
    );
    await client.query(
      `insert into saved_card_change_log (card_id, subscriber_id, change, changed_fields, previous, changed_at)
       select c.id, c.subscriber_id, 'updated', array['card_bank_name'],
         jsonb_build_object('card_bank_name', 'BANK' || k), c.first_seen_at + k * interval '13 days'
       from saved_cards c cross join generate_series(1, $1::int) k`,
      [updates],
    );
    await client.query(
      `update saved_cards c set updated_at = h.last from (
         select card_id, max(changed_at) as last from saved_card_changes group by 1) h where h.card_id = c.id`,
    );
    // A successful run of every subscriber every 6 days, and one now, each in the partition of its day.
    await client.query(
      `select sync_runs_add_partition(d::date) from generate_series(now() - interval '366 days', now(), interval '1 day') d`,
    );
    await client.query(
      `insert into sync_runs (subscriber_id, trigger, started_at, finished_at, status)
       select s, 'nightly', t, t, 'succeeded'
       from generate_series(1, $1::bigint) s,
            generate_series(now() - interval '365 days', now(), interval '6 days') t`,
      [subscribers],
    );
    await client.query('analyze');
  });
  const counts = await client.query<{ history: number; runs: number }>(
    `select (select count(*)::int from saved_card_changes) as history, (select count(*)::int from sync_runs) as runs`,
  );
  const { history, runs } = counts.rows[0]!;
  console.log(
    `seeded ${cards} cards, ${history} history rows, ${runs} sync_runs in ${(seed.ms / 1000).toFixed(1)} s`,
  );

  console.log('\n| as of | whole table: rows | ms | one wallet: median ms | p95 ms |');
  console.log('|---|---|---|---|---|');
  for (const daysAgo of [1, 30, 180, 360]) {
    const at = new Date(Date.now() - daysAgo * 86_400_000);
    const whole = await timed(() =>
      client.query('select count(*)::int as n from saved_cards_as_of($1)', [at]),
    );
    const times: number[] = [];
    for (let i = 0; i < wallets; i++) {
      const who = 1 + ((i * 7919) % subscribers);
      times.push((await timed(() => client.query('select * from saved_cards_as_of($1, $2)', [at, who]))).ms);
    }
    times.sort((a, b) => a - b);
    const q = (p: number) => times[Math.min(times.length - 1, Math.floor(p * times.length))]!.toFixed(2);
    console.log(
      `| ${daysAgo} d ago | ${whole.value.rows[0]!.n} | ${Math.round(whole.ms)} | ${q(0.5)} | ${q(0.95)} |`,
    );
  }
  const plan = await client.query("explain select * from saved_cards_as_of(now() - interval '30 days', 42)");
  console.log(`\nplan of one wallet:\n${plan.rows.map((r) => `  ${r['QUERY PLAN']}`).join('\n')}`);
  await client.end();
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
