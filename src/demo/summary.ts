import { sql } from 'drizzle-orm';
import type { Db } from '../../db/client.js';

// The demo's "what landed": this run's syncs of its own subscribers, nothing older and nothing
// else that shares the database.

export interface DemoScope {
  firstId: number;
  lastId: number;
  /** When this run enqueued its jobs. */
  since: Date;
}

function table(rows: Record<string, unknown>[]): string {
  if (rows.length === 0) return '   (no rows)';
  const cols = Object.keys(rows[0]!);
  const cell = (v: unknown) => (v === null ? '' : String(v));
  const widths = cols.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (values: string[]) => `   ${values.map((v, i) => v.padEnd(widths[i]!)).join('  ')}`.trimEnd();
  return [
    line(cols),
    line(widths.map((w) => '-'.repeat(w))),
    ...rows.map((r) => line(cols.map((c) => cell(r[c])))),
  ].join('\n');
}

export async function summarize(db: Db, scope: DemoScope): Promise<string> {
  const ids = sql`subscriber_id between ${scope.firstId} and ${scope.lastId}`;
  const runs = await db.execute(sql`
    select status, count(*)::int as syncs from sync_runs
    where ${ids} and started_at >= ${scope.since.toISOString()}::timestamptz
    group by 1 order by 2 desc, 1`);
  const perBank = await db.execute(sql`
    select card_bank_name as bank, count(*)::int as active_cards from saved_cards_active
    where ${ids} group by 1 order by 2 desc, 1`);
  const fresh = await freshnessRows(db, scope);
  return [
    `   this run's syncs (subscribers ${scope.firstId}-${scope.lastId})`,
    table(runs.rows),
    '',
    '   active cards per bank',
    table(perBank.rows),
    '',
    `   freshness of the demo's ${scope.lastId - scope.firstId + 1} subscribers (last successful sync)`,
    table(fresh),
  ].join('\n');
}

/** In the order the freshness table lists them; every subscriber of the run is in one. */
const BUCKETS = ['synced within 1 h', 'synced over 1 h ago', 'never synced', 'not found upstream'] as const;

/**
 * Each of the run's subscribers in one bucket, so the rows add up to the run's total: one whose
 * last answer in this run was a 404 is "not found upstream" (it may have no `subscribers` row at
 * all: an unknown id gets its run only), the others by their last success.
 */
export async function freshnessRows(
  db: Db,
  scope: DemoScope,
): Promise<{ bucket: string; subscribers: number }[]> {
  const { rows } = await db.execute<{ bucket: string; n: number }>(sql`
    with ids as (
      select generate_series(${scope.firstId}::bigint, ${scope.lastId}::bigint) as subscriber_id
    ), last_answer as (
      select distinct on (subscriber_id) subscriber_id, status from sync_runs
      where subscriber_id between ${scope.firstId} and ${scope.lastId}
        and started_at >= ${scope.since.toISOString()}::timestamptz
      order by subscriber_id, id desc
    )
    select case
        when a.status = 'not_found' then ${BUCKETS[3]}
        when s.last_success_at > now() - interval '1 hour' then ${BUCKETS[0]}
        when s.last_success_at is not null then ${BUCKETS[1]}
        else ${BUCKETS[2]} end as bucket,
      count(*)::int as n
    from ids i left join subscribers s using (subscriber_id) left join last_answer a using (subscriber_id)
    group by 1`);
  const count = new Map(rows.map((r) => [r.bucket, r.n]));
  const buckets = BUCKETS.map((bucket) => ({ bucket, subscribers: count.get(bucket) ?? 0 }));
  return [...buckets, { bucket: 'total', subscribers: buckets.reduce((n, b) => n + b.subscribers, 0) }];
}
