import { activeCardsByBank, freshnessByBucket, runsByStatus } from '../../db/admin/index.js';
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
  const runs = await runsByStatus(db, scope);
  const perBank = await activeCardsByBank(db, scope);
  const fresh = await freshnessRows(db, scope);
  return [
    `   this run's syncs (subscribers ${scope.firstId}-${scope.lastId})`,
    table(runs),
    '',
    '   active cards per bank',
    table(perBank),
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
  const rows = await freshnessByBucket(db, scope, {
    notFound: BUCKETS[3],
    within1h: BUCKETS[0],
    over1h: BUCKETS[1],
    never: BUCKETS[2],
  });
  const count = new Map(rows.map((r) => [r.bucket, r.n]));
  const buckets = BUCKETS.map((bucket) => ({ bucket, subscribers: count.get(bucket) ?? 0 }));
  return [...buckets, { bucket: 'total', subscribers: buckets.reduce((n, b) => n + b.subscribers, 0) }];
}
