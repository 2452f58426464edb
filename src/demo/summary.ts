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

export function table(rows: Record<string, unknown>[]): string {
  if (rows.length === 0) return '   (no rows)';
  const cols = Object.keys(rows[0]!);
  const cell = (v: unknown) => (v === null ? '' : String(v));
  const widths = cols.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (values: string[]) => `   ${values.map((v, i) => v.padEnd(widths[i]!)).join('  ')}`;
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
  const fresh = await db.execute(sql`
    select count(*) filter (where last_success_at > now() - interval '1 hour')::int as "within 1 h",
           count(*) filter (where last_success_at <= now() - interval '1 hour')::int as "older",
           count(*) filter (where last_success_at is null)::int as "never"
    from subscribers where ${ids}`);
  return [
    `   this run's syncs (subscribers ${scope.firstId}-${scope.lastId})`,
    table(runs.rows),
    '',
    '   active cards per bank',
    table(perBank.rows),
    '',
    "   freshness of the demo's subscribers (last successful sync)",
    table(fresh.rows),
  ].join('\n');
}
