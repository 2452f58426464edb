import pg from 'pg';
import { runMigrations } from '../db/migrate.js';
import { claimDue } from '../db/refresh/schedule.js';
import { afterClaim, defaultPolicy } from '../src/freshness/index.js';
import { databaseFlag, parseFlags, seedingPool } from './harness.js';

// Choosing the next 1,000 due subscribers out of 10,000,000: the claim reads the
// subscriber_schedule_due_idx index (migration 0025), never the table.   npm run bench:freshness-index
const { values } = parseFlags({
  options: {
    subscribers: { type: 'string', default: '10000000' },
    ...databaseFlag('cards_sync_bench_freshness'),
  },
});
const n = Number(values.subscribers);
const url = values['database-url']!;

async function main() {
  const admin = new pg.Client({ connectionString: url.replace(/\/[^/]+$/, '/postgres') });
  await admin.connect();
  await admin.query(`drop database if exists "${new URL(url).pathname.slice(1)}" with (force)`);
  await admin.end();
  await runMigrations(url);
  const pool = seedingPool(url, 2);
  const t0 = performance.now();
  // The schedule rows in one statement after, not one trigger call each (the trigger makes the
  // same rows: due when the plan says).
  await pool.query('alter table subscribers disable trigger subscribers_schedule_row');
  await pool.query(
    `insert into subscribers (subscriber_id, last_success_at, change_rate_per_day, next_refresh_at)
      select g, now() - (g % 604800) * interval '1 second', 0.01 + (g % 97) / 100.0,
        now() + ((g::bigint * 7919) % 604800) * interval '1 second'
      from generate_series(1, $1::int) g`,
    [n],
  );
  await pool.query('insert into subscriber_schedule select subscriber_id, next_refresh_at from subscribers');
  await pool.query('alter table subscribers enable trigger subscribers_schedule_row');
  await pool.query('vacuum analyze subscribers');
  await pool.query('vacuum analyze subscriber_schedule');
  console.log(`seeded ${n} subscribers in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  const plan = await pool.query(
    // The claim's query (db/refresh/schedule.ts claimDue).
    `explain (analyze, buffers) select q.subscriber_id, s.next_refresh_at > q.due_at as behind,
        s.change_rate_per_day
      from subscriber_schedule q join subscribers s on s.subscriber_id = q.subscriber_id
      where q.subscriber_id <> all('{}'::bigint[]) and (q.leased_until is null or q.leased_until <= clock_timestamp())
      order by q.due_at asc nulls first, q.subscriber_id limit 1000`,
  );
  console.log(plan.rows.map((r) => r['QUERY PLAN']).join('\n'));
  const times: number[] = [];
  const params = defaultPolicy();
  for (let i = 0; i < 20; i++) {
    const started = performance.now();
    const ids = await claimDue(pool, 1000, (s, now) => afterClaim(s, now, params));
    times.push(performance.now() - started);
    if (ids.length !== 1000) throw new Error(`claimed ${ids.length}`);
  }
  times.sort((a, b) => a - b);
  console.log(
    `claimDue(1000) at ${n} subscribers, 20 claims (select + hold of each, one transaction): ` +
      `median ${times[10]!.toFixed(1)} ms, max ${times[19]!.toFixed(1)} ms`,
  );
  await pool.end();
}
await main();
